"""`--projected`: for a gateway whose store is not readable here, the events themselves.

A `session.message` event carries OpenClaw's display projection of a message, not the
transcript entry: text cut at 8,000 characters, thinking signatures removed, no `parentId`,
silent (NO_REPLY) rows and every non-message entry (session header, model changes, custom
entries) left out. The Gateway has no method that returns raw entries either: `chat.history`
and `chat.message.get` are display-normalized too. So each event becomes an entry of its own
making, marked as projected twice: a `__sessionStream.projection` field ("display", with the
message's seq and the raw row's seq), which the worker passes through to the clean topic, and
an `openclaw-projection: display` header, which the worker forwards with the session's other
`openclaw-*` headers. Events sent while the socket was down are not replayed by the
gateway, so they are missing here; nothing is checkpointed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from stream.sources.base import Batch, Record
from stream.sources.gateway.client import GatewayClient
from stream.sources.gateway.protocol import SessionEvent
from stream.sources.gateway.source import Gateway


def projected_entry(payload: dict[str, Any]) -> bytes | None:
    """The entry made of a session.message payload; None when it has no message."""
    message = payload.get("message")
    if not isinstance(message, dict):
        return None
    openclaw = message.get("__openclaw")
    position = openclaw.get("transcriptPosition") if isinstance(openclaw, dict) else None
    entry: dict[str, Any] = {"type": "message"}
    message_id = payload.get("messageId") or (openclaw or {}).get("id")
    if message_id is not None:
        entry["id"] = message_id
    entry["message"] = message
    entry["__sessionStream"] = {
        "projection": "display",
        "messageSeq": payload.get("messageSeq"),
        "rawSeq": position.get("rawSeq") if isinstance(position, dict) else None,
    }
    return orjson.dumps(entry)


class ProjectedSource:
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self._queue: list[Record] = []
        self.client: GatewayClient | None = None

    def poll(self) -> Batch[None]:
        records, self._queue = self._queue, []
        return Batch(records, None)

    def commit(self, batch: Batch[None]) -> None:
        """Nothing to keep: the gateway does not replay events."""

    def close(self) -> None:
        """Nothing is held open outside the watcher."""

    async def watch(self, news: asyncio.Event, stop: asyncio.Event) -> None:
        def on_event(event: SessionEvent) -> None:
            if event.name != "session.message" or event.session_id is None:
                return
            value = projected_entry(event.payload)
            if value is None:
                return
            headers = [("openclaw-projection", b"display")]
            if event.agent_id is not None:
                headers.append(("openclaw-agent-id", event.agent_id.encode()))
            if event.session_key is not None:
                headers.append(("openclaw-session-key", event.session_key.encode()))
            self._queue.append((event.session_id.encode(), value, tuple(headers)))
            news.set()

        gateway = self.gateway
        self.client = GatewayClient(
            gateway.url,
            gateway.credentials,
            on_event=on_event,
            on_connected=lambda: None,
            startup_deadline=gateway.startup_deadline,
            backoff=gateway.backoff,
        )
        await self.client.run()
