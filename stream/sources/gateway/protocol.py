"""The Gateway WebSocket protocol v4, as far as a read-only operator client speaks it.

Frames are JSON text: requests `{type:"req", id, method, params}`, responses
`{type:"res", id, ok, payload|error}`, events `{type:"event", event, payload, seq?}`. The server
speaks first (`connect.challenge`); the first client frame must be the `connect` request.
Errors are `{code, message, details?, retryable?, retryAfterMs?}`; clients branch on `code` and
`details.code`, `message` is for people. (docs/gateway/protocol/transport.md and handshake.md
of OpenClaw; the error shapes in tests/data/openclaw-live/ws-connect-errors.jsonl are real.)
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import orjson

PROTOCOL_VERSION = 4
# A trusted local backend may connect on loopback with the shared token or password and no
# device identity (handshake.md); operator.read is all a reader needs.
CLIENT_ID = "gateway-client"
CLIENT_MODE = "backend"
ROLE = "operator"
SCOPES = ("operator.read",)
# What the reference client waits for the challenge, and the tick interval before hello-ok.
HANDSHAKE_TIMEOUT = 15.0
DEFAULT_TICK_INTERVAL = 30.0


class ProtocolError(ValueError):
    """A frame this client cannot read: not JSON, not an object, or not of the protocol."""


@dataclass(eq=False)  # not frozen: raising sets attributes (__traceback__) on exceptions
class GatewayError(Exception):
    """An error response. `label` is what a log line names: the detail code, then the code."""

    code: str
    message: str
    detail_code: str | None = None
    retryable: bool = False
    retry_after: float | None = None  # seconds

    @classmethod
    def of(cls, error: object) -> GatewayError:
        if not isinstance(error, dict):
            return cls("UNKNOWN", f"error response without an error object: {error!r:.200}")
        details = error.get("details")
        detail_code = details.get("code") if isinstance(details, dict) else None
        after = error.get("retryAfterMs")
        return cls(
            str(error.get("code", "UNKNOWN")),
            str(error.get("message", "")),
            detail_code if isinstance(detail_code, str) else None,
            error.get("retryable") is True,
            after / 1000 if isinstance(after, int | float) and after >= 0 else None,
        )

    @property
    def label(self) -> str:
        return f"{self.detail_code} ({self.code})" if self.detail_code else self.code

    def __str__(self) -> str:
        return f"{self.label}: {self.message}" if self.message else self.label


@dataclass(frozen=True)
class Auth:
    """The shared secret: a token or a password. Never formatted into a message."""

    token: str | None = None
    password: str | None = None

    def __repr__(self) -> str:
        return "Auth(<hidden>)"

    def as_params(self) -> dict[str, str]:
        if self.token is not None:
            return {"token": self.token}
        if self.password is not None:
            return {"password": self.password}
        return {}


@dataclass(frozen=True)
class Hello:
    protocol: int
    tick_interval: float  # seconds
    server_version: str | None


def request(method: str, params: dict[str, Any]) -> tuple[str, bytes]:
    """(id, frame) of a request."""
    request_id = str(uuid.uuid4())
    frame = {"type": "req", "id": request_id, "method": method, "params": params}
    return request_id, orjson.dumps(frame)


def connect_params(auth: Auth, version: str, platform: str) -> dict[str, Any]:
    return {
        "minProtocol": PROTOCOL_VERSION,
        "maxProtocol": PROTOCOL_VERSION,
        "client": {"id": CLIENT_ID, "version": version, "platform": platform, "mode": CLIENT_MODE},
        "role": ROLE,
        "scopes": list(SCOPES),
        "auth": auth.as_params(),
    }


def parse(text: str | bytes) -> dict[str, Any]:
    try:
        frame = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise ProtocolError(f"a frame that is not JSON: {error}") from error
    if not isinstance(frame, dict) or frame.get("type") not in ("res", "event", "req"):
        raise ProtocolError(f"a frame of no known type: {str(frame)[:200]}")
    return frame


def is_event(frame: dict[str, Any], name: str) -> bool:
    return frame.get("type") == "event" and frame.get("event") == name


def hello(payload: object) -> Hello:
    """The hello-ok payload, checked: a gateway that answers with another protocol is refused
    here as it would be by the gateway (PROTOCOL_MISMATCH)."""
    if not isinstance(payload, dict) or payload.get("type") != "hello-ok":
        raise ProtocolError(f"the connect response is not hello-ok: {str(payload)[:200]}")
    protocol = payload.get("protocol")
    if protocol != PROTOCOL_VERSION:
        raise GatewayError(
            "INVALID_REQUEST",
            f"the gateway speaks protocol {protocol}, this client {PROTOCOL_VERSION}",
            "PROTOCOL_MISMATCH",
        )
    policy = payload.get("policy")
    tick = policy.get("tickIntervalMs") if isinstance(policy, dict) else None
    server = payload.get("server")
    version = server.get("version") if isinstance(server, dict) else None
    return Hello(
        protocol,
        tick / 1000 if isinstance(tick, int | float) and tick > 0 else DEFAULT_TICK_INTERVAL,
        version if isinstance(version, str) else None,
    )


@dataclass(frozen=True)
class SessionEvent:
    """What a `session.message` or `sessions.changed` event says about where to look."""

    name: str
    agent_id: str | None
    session_id: str | None
    session_key: str | None
    reason: str | None
    payload: dict[str, Any]


def session_event(frame: dict[str, Any]) -> SessionEvent | None:
    name = frame.get("event")
    payload = frame.get("payload")
    if name not in ("session.message", "sessions.changed") or not isinstance(payload, dict):
        return None

    def text(key: str) -> str | None:
        value = payload.get(key)
        return value if isinstance(value, str) and value else None

    return SessionEvent(
        name, text("agentId"), text("sessionId"), text("sessionKey"), text("reason"), payload
    )
