"""A fake OpenClaw Gateway: a WebSocket server that answers with the real capture's frames.

The challenge, the hello-ok and the session.message shape are those of
tests/data/openclaw-live/ws-capture-3-turns.jsonl, the refusals those of ws-connect-errors.jsonl
(both from OpenClaw 2026.9.6 on loopback). What a test changes: which connects are refused or
answered UNAVAILABLE, the tick interval, and the events it emits; `drop()` cuts every socket.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import orjson
from websockets.asyncio.server import ServerConnection, serve

from tests.support.data import DATA

LIVE = DATA / "openclaw-live"


def _capture() -> list[dict[str, Any]]:
    return [orjson.loads(line)["frame"] for line in (LIVE / "ws-capture-3-turns.jsonl").open("rb")]


CAPTURE = _capture()
CHALLENGE = CAPTURE[0]
HELLO = CAPTURE[2]["payload"]
SESSION_MESSAGE = next(f for f in CAPTURE if f.get("event") == "session.message")
SESSIONS_CHANGED = next(f for f in CAPTURE if f.get("event") == "sessions.changed")
REFUSALS = {
    orjson.loads(line)["frame"]["error"]["details"]["code"]: orjson.loads(line)["frame"]["error"]
    for line in (LIVE / "ws-connect-errors.jsonl").open("rb")
}
TICK = next(f for f in CAPTURE if f.get("event") == "tick")
TOKEN = "test-token-123"


def unavailable(retry_after_ms: int) -> dict[str, Any]:
    """What a gateway still starting its sidecars answers a connect with (handshake.md)."""
    return {
        "code": "UNAVAILABLE",
        "message": "gateway starting",
        "details": {"reason": "startup-sidecars"},
        "retryable": True,
        "retryAfterMs": retry_after_ms,
    }


def session_message(agent: str, session_id: str, key: str, seq: int) -> dict[str, Any]:
    frame = copy.deepcopy(SESSION_MESSAGE)
    payload = frame["payload"]
    payload.update(agentId=agent, sessionId=session_id, sessionKey=key, messageSeq=seq)
    payload["message"]["__openclaw"]["transcriptPosition"]["rawSeq"] = seq
    return frame


def sessions_changed(agent: str, session_id: str | None, key: str, reason: str) -> dict:
    frame = copy.deepcopy(SESSIONS_CHANGED)
    frame["payload"].update(agentId=agent, sessionKey=key, reason=reason)
    if session_id is None:
        frame["payload"].pop("sessionId", None)
    else:
        frame["payload"]["sessionId"] = session_id
    return frame


@dataclass
class FakeGateway:
    # Answers to the next connects, in order (an error object refuses); then hello-ok.
    answers: list[dict[str, Any]] = field(default_factory=list)
    tick_interval_ms: int = 30_000
    send_ticks: bool = True
    connects: list[dict[str, Any]] = field(default_factory=list)  # the params received
    connect_times: list[float] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # methods, in order
    _sockets: set[ServerConnection] = field(default_factory=set)
    subscribed: asyncio.Event = field(default_factory=asyncio.Event)

    url: str = ""  # set once serving; kept after, for the messages that name it

    async def emit(self, frame: dict[str, Any]) -> None:
        for socket in list(self._sockets):
            with suppress(Exception):
                await socket.send(orjson.dumps(frame).decode())

    async def drop(self) -> None:
        """Cuts every connection without a close handshake, as a crash or a network would."""
        for socket in list(self._sockets):
            socket.transport.abort()
        self._sockets.clear()
        self.subscribed.clear()

    async def _handle(self, socket: ServerConnection) -> None:
        self._sockets.add(socket)
        try:
            await socket.send(orjson.dumps(CHALLENGE).decode())
            connect = orjson.loads(await socket.recv())
            self.connects.append(connect["params"])
            self.connect_times.append(asyncio.get_running_loop().time())
            if self.answers:
                error = self.answers.pop(0)
                await self._answer(socket, connect["id"], error=error)
                await socket.close(1008, "refused")
                return
            policy = {**HELLO["policy"], "tickIntervalMs": self.tick_interval_ms}
            hello = {**HELLO, "policy": policy}
            await self._answer(socket, connect["id"], payload=hello)
            ticker = asyncio.create_task(self._tick(socket)) if self.send_ticks else None
            try:
                async for text in socket:
                    frame = orjson.loads(text)
                    self.requests.append(frame["method"])
                    await self._answer(socket, frame["id"], payload={"subscribed": True})
                    if frame["method"] == "sessions.subscribe":
                        self.subscribed.set()
            finally:
                if ticker is not None:
                    ticker.cancel()
        except Exception:  # noqa: BLE001 - a client gone mid-handshake ends only its socket
            pass
        finally:
            self._sockets.discard(socket)

    async def _tick(self, socket: ServerConnection) -> None:
        while True:
            await asyncio.sleep(self.tick_interval_ms / 1000)
            await socket.send(orjson.dumps(TICK).decode())

    async def _answer(self, socket: ServerConnection, request_id: str, **body: Any) -> None:
        frame = {"type": "res", "id": request_id, "ok": "error" not in body, **body}
        await socket.send(orjson.dumps(frame).decode())


@asynccontextmanager
async def running(gateway: FakeGateway) -> AsyncIterator[FakeGateway]:
    async with serve(gateway._handle, "127.0.0.1", 0) as server:
        host, port = next(iter(server.sockets)).getsockname()[:2]
        gateway.url = f"ws://{host}:{port}"
        yield gateway


class ThreadedGateway:
    """The fake gateway on a loop of its own thread, for code that runs asyncio.run itself
    (a command's main)."""

    def __init__(self, gateway: FakeGateway) -> None:
        self.gateway = gateway
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ThreadedGateway:
        self._thread.start()
        self._ready.wait(5)
        return self

    @property
    def url(self) -> str:
        return self.gateway.url

    @property
    def subscribed(self) -> bool:
        return self.gateway.subscribed.is_set()

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)

    def call(self, coroutine: Any) -> Any:
        """Runs a coroutine (an emit, a drop) on the gateway's loop and waits for it."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(5)

    def _run(self) -> None:
        async def serve_until_stopped() -> None:
            self._stop = asyncio.Event()
            self.gateway.subscribed = asyncio.Event()
            async with running(self.gateway):
                self._ready.set()
                await self._stop.wait()

        self._loop.run_until_complete(serve_until_stopped())
        self._loop.close()
