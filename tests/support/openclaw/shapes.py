"""Reading OpenClaw transcript entries in the tests, independently of the engine's own parser:
what a test expects is worked out from the entries' shapes, not from the code under test."""

from __future__ import annotations

from typing import Any

import orjson

CACHE_TTL = "openclaw.cache-ttl"
BOOTSTRAP_CONTEXT = "openclaw:bootstrap-context:full"

Entry = dict[str, Any]


def parsed(rows: list[bytes]) -> list[Entry]:
    return [orjson.loads(raw) for raw in rows]


def message(entry: Entry) -> Entry:
    value = entry.get("message") if entry.get("type") == "message" else None
    return value if isinstance(value, dict) else {}


def role(entry: Entry) -> str | None:
    return message(entry).get("role")


def block_types(entry: Entry) -> list[str]:
    content = message(entry).get("content")
    return [b.get("type") for b in content] if isinstance(content, list) else ["string"]


def text(entry: Entry) -> str:
    """The text blocks joined (or a string content), as a reader of the transcript sees it."""
    content = message(entry).get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content or [] if b.get("type") == "text")


def is_custom(entry: Entry, custom_type: str) -> bool:
    return entry.get("type") == "custom" and entry.get("customType") == custom_type


def is_mirror(entry: Entry) -> bool:
    """A delivery-mirror row: what the gateway delivered, written into the transcript."""
    m = message(entry)
    return role(entry) == "assistant" and (m.get("provider"), m.get("model")) == (
        "openclaw", "delivery-mirror")


def is_cli_copy(entry: Entry) -> bool:
    return role(entry) == "assistant" and message(entry).get("api") == "cli"


def is_reply(entry: Entry) -> bool:
    """A model's answer (not a mirror, not a cli copy)."""
    return role(entry) == "assistant" and not is_mirror(entry) and not is_cli_copy(entry)


def idempotency_key(entry: Entry) -> str | None:
    return message(entry).get("idempotencyKey")


def replies(entries: list[Entry]) -> list[Entry]:
    return [e for e in entries if is_reply(e)]


def latest_reply_before(entries: list[Entry], index: int) -> Entry | None:
    """The model reply nearest before entries[index], within its turn (no user between)."""
    for earlier in reversed(entries[:index]):
        if role(earlier) == "user":
            return None
        if is_reply(earlier):
            return earlier
    return None
