"""The connection to the Gateway: handshake, subscription, keepalive and reconnects.

The WebSocket framing, pings and close handshake are the `websockets` package's; the protocol
on top is ours (protocol.py). After `hello-ok` the client subscribes with `sessions.subscribe`,
which sends this connection every session's `session.message` and `sessions.changed` events,
and hands those to `on_event`. The gateway sends a `tick` event every `tickIntervalMs`; as the
reference client does, silence for twice that closes the socket (code 4000) and reconnects.

Failures are retried: a retryable `UNAVAILABLE` after its `retryAfterMs`, anything else with
exponential backoff from 1 s to 30 s (the reference client's policy). Until the first
`hello-ok`, a failure that lasts past the start-up deadline is final: `run` raises SourceError
with one line naming the URL and the gateway's error code; a deadline of 0 waits for ever
(`session-stream up`: a gateway that boots late is waited for). Once connected, the client
never gives up by itself: the source reads the store while the socket is down.
"""

from __future__ import annotations

import asyncio
import logging
import platform
import time
from collections.abc import Callable
from importlib import metadata

import websockets
from websockets.asyncio.client import ClientConnection

from stream.kafka.retry import Backoff
from stream.sources.base import SourceError
from stream.sources.gateway.protocol import (
    HANDSHAKE_TIMEOUT,
    Auth,
    GatewayError,
    Hello,
    ProtocolError,
    SessionEvent,
    connect_params,
    hello,
    is_event,
    parse,
    request,
    session_event,
)

log = logging.getLogger(__name__)

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 30.0
# A little over the gateway's 25 MiB MAX_PAYLOAD_BYTES: its biggest frame still fits.
MAX_FRAME_BYTES = 26 * 1024 * 1024
TICK_TIMEOUT_CLOSE = 4000
# Retries of one request the gateway answered with a retryable UNAVAILABLE.
REQUEST_RETRIES = 5

# websockets logs every frame at DEBUG, the connect request (with the token) among them: its
# logger here never goes below INFO, whatever the root logger's level.
WIRE_LOG = logging.getLogger(f"{__name__}.wire")
WIRE_LOG.setLevel(logging.INFO)

TRANSPORT_ERRORS = (OSError, TimeoutError, websockets.WebSocketException)


def _version() -> str:
    try:
        return metadata.version("session-stream")
    except metadata.PackageNotFoundError:
        return "0"


class GatewayClient:
    def __init__(
        self,
        url: str,
        credentials: Callable[[], Auth],
        *,
        on_event: Callable[[SessionEvent], None],
        on_connected: Callable[[], None],
        startup_deadline: float,
        backoff: tuple[float, float] = (INITIAL_BACKOFF, MAX_BACKOFF),
    ) -> None:
        self.url = url
        self.credentials = credentials  # read on every attempt: a rotated token file is seen
        self.on_event = on_event
        self.on_connected = on_connected
        self.startup_deadline = startup_deadline
        self.backoff = backoff
        self.connected = False
        self.connections = 0  # hello-ok answers so far

    async def run(self) -> None:
        """Connects, and connects again, until cancelled."""
        started = time.monotonic()
        backoff = Backoff(*self.backoff)
        while True:
            retry_after = None
            try:
                await self._connection()
                problem = f"the gateway at {self.url} closed the connection"
            except GatewayError as error:
                problem = f"the gateway at {self.url} refused the connection: {error}"
                if error.retryable:
                    retry_after = error.retry_after
            except ProtocolError as error:
                problem = f"the gateway at {self.url} broke the protocol: {error}"
            except websockets.ConnectionClosed as error:
                problem = f"the gateway at {self.url} closed the connection: {_closing(error)}"
            except TRANSPORT_ERRORS as error:
                problem = f"no gateway answers at {self.url}: {_describe(error)}"
            if self.connected:
                backoff.reset()  # it worked for a while: start the backoff over
                self.connected = False
            wait = retry_after if retry_after is not None else backoff.next()
            if (not self.connections and self.startup_deadline
                    and time.monotonic() - started + wait > self.startup_deadline):
                raise SourceError(
                    f"{problem}; gave up after the {self.startup_deadline:g} s start-up deadline"
                )
            log.warning("%s; connecting again in %.1f s", problem, wait)
            await asyncio.sleep(wait)

    async def _connection(self) -> None:
        """One connection, from the challenge to its close."""
        async with websockets.connect(
            self.url,
            max_size=MAX_FRAME_BYTES,
            open_timeout=HANDSHAKE_TIMEOUT,
            close_timeout=1,
            compression=None,  # the gateway does not negotiate permessage-deflate
            logger=WIRE_LOG,
        ) as socket:
            greeting = await self._receive(socket, HANDSHAKE_TIMEOUT)
            if not is_event(greeting, "connect.challenge"):
                raise ProtocolError(f"expected connect.challenge, got {str(greeting)[:200]}")
            params = connect_params(self.credentials(), _version(), platform.system().lower())
            agreed = hello(await self._call(socket, "connect", params, HANDSHAKE_TIMEOUT))
            await self._call(socket, "sessions.subscribe", {}, HANDSHAKE_TIMEOUT)
            self.connected = True
            self.connections += 1
            log.info(
                "connected to the gateway at %s (OpenClaw %s, protocol %d); subscribed to "
                "every session", self.url, agreed.server_version, agreed.protocol,
            )
            self.on_connected()
            await self._follow(socket, agreed)

    async def _follow(self, socket: ClientConnection, agreed: Hello) -> None:
        silence = agreed.tick_interval * 2
        while True:
            try:
                frame = await self._receive(socket, silence)
            except TimeoutError:
                log.warning("no tick from %s for %.0f s: closing to reconnect", self.url, silence)
                await socket.close(TICK_TIMEOUT_CLOSE, "tick timeout")
                return
            self._dispatch(frame)

    async def _call(
        self, socket: ClientConnection, method: str, params: dict, timeout: float
    ) -> object:
        """A request's payload; events arriving meanwhile are dispatched, not lost."""
        for attempt in range(REQUEST_RETRIES + 1):
            request_id, frame = request(method, params)
            await socket.send(frame.decode())
            deadline = time.monotonic() + timeout
            while True:
                answer = await self._receive(socket, max(0.0, deadline - time.monotonic()))
                if answer.get("type") == "res" and answer.get("id") == request_id:
                    break
                self._dispatch(answer)
            if answer.get("ok") is True:
                return answer.get("payload")
            error = GatewayError.of(answer.get("error"))
            # The handshake's own UNAVAILABLE (startup-sidecars) needs a new socket: the
            # gateway closes this one. Other requests are retried in place.
            if method == "connect" or not error.retryable or attempt == REQUEST_RETRIES:
                raise error
            await asyncio.sleep(error.retry_after or self.backoff[0])
        raise AssertionError("unreachable")

    async def _receive(self, socket: ClientConnection, timeout: float) -> dict:
        text = await asyncio.wait_for(socket.recv(), timeout)
        return parse(text)

    def _dispatch(self, frame: dict) -> None:
        event = session_event(frame)
        if event is not None:
            self.on_event(event)
        elif is_event(frame, "shutdown"):
            log.info("the gateway at %s is shutting down", self.url)


def _closing(error: websockets.ConnectionClosed) -> str:
    close = error.rcvd or error.sent
    if close is None:
        return "no close frame (the connection dropped)"
    return f"code {close.code}" + (f" ({close.reason})" if close.reason else "")


def _describe(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, websockets.InvalidStatus):
        return f"HTTP {error.response.status_code} instead of a WebSocket"
    return str(error) or type(error).__name__
