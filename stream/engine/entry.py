"""Parse one raw transcript line once and expose what the rules look at."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import orjson

from stream.engine.text import digest64, normalize, text_hash, visible_text

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
TOOL_CALL_BLOCKS = frozenset({"toolCall", "tool_use", "toolUse", "function_call"})
MIRROR_MODELS = frozenset({"delivery-mirror", "gateway-injected"})
ERROR_STOPS = frozenset({"error", "aborted"})
_POSITIONAL_KEY = re.compile(r"^(?P<scope>.*):(?P<role>user|assistant|toolResult):\d+$")


class _cached:
    """functools.cached_property without its lock (Python 3.11 takes one on every first access,
    the engine's largest cost): an Entry is never shared between threads."""

    def __init__(self, compute) -> None:
        self._compute = compute
        self._name = compute.__name__

    def __get__(self, entry, owner=None):
        if entry is None:
            return self
        value = entry.__dict__[self._name] = self._compute(entry)
        return value


class MalformedEntry(ValueError):
    """The line cannot be an entry; the reason goes into the dead letter verbatim."""


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _loads(raw: bytes) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as fast_error:
        # orjson refuses some valid JSON (lone surrogate escapes, for one); the stdlib parser
        # is the slow path that keeps such lines instead of dead-lettering them.
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedEntry("not UTF-8 text") from None
        try:
            return json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            raise MalformedEntry(f"not JSON: {fast_error}") from None


def parse(raw: bytes) -> Entry:
    body = raw.rstrip(b"\r\n")
    value = _loads(body)
    if not isinstance(value, dict):
        raise MalformedEntry(f"not a JSON object but {type(value).__name__}")
    kind = value.get("type")
    if not isinstance(kind, str):
        raise MalformedEntry("no string 'type' field")
    entry_id = value.get("id")
    if kind != "session" and not (isinstance(entry_id, str) and entry_id):
        raise MalformedEntry("no string 'id' field")
    return Entry(body, value, kind)


@dataclass
class Entry:
    raw: bytes
    value: dict
    type: str

    @_cached
    def id(self) -> str | None:
        entry_id = self.value.get("id")
        return entry_id if isinstance(entry_id, str) else None

    @_cached
    def parent_id(self) -> str | None:
        parent = self.value.get("parentId")
        return parent if isinstance(parent, str) and parent else None

    @_cached
    def fingerprint(self) -> int:
        return digest64(self.raw)

    @_cached
    def message(self) -> dict | None:
        if self.type != "message":
            return None
        message = self.value.get("message")
        return message if isinstance(message, dict) else None

    @_cached
    def role(self) -> str | None:
        role = self.message.get("role") if self.message else None
        return role if isinstance(role, str) else None

    @_cached
    def blocks(self) -> list[dict]:
        content = self.message.get("content") if self.message else None
        if not isinstance(content, list):
            return []
        return [block for block in content if isinstance(block, dict)]

    @_cached
    def has_thinking(self) -> bool:
        return any(block.get("type") in THINKING_BLOCKS for block in self.blocks)

    @_cached
    def tool_call_ids(self) -> list[str]:
        return [
            block["id"]
            for block in self.blocks
            if block.get("type") in TOOL_CALL_BLOCKS and isinstance(block.get("id"), str)
        ]

    @_cached
    def has_tool_calls(self) -> bool:
        return any(block.get("type") in TOOL_CALL_BLOCKS for block in self.blocks)

    @_cached
    def is_text_only(self) -> bool:
        content = self.message.get("content") if self.message else None
        if isinstance(content, str):
            return True
        return all(block.get("type") == "text" for block in self.blocks)

    @_cached
    def normalized_text(self) -> str:
        if not self.message:
            return ""
        return normalize(visible_text(self.message.get("content")))

    @_cached
    def visible_text(self) -> str:
        return visible_text(self.message.get("content")) if self.message else ""

    @_cached
    def text_hash(self) -> int:
        """0 stands for 'no text': rules never fire on empty text."""
        text = self.normalized_text
        return text_hash(text) | 1 if text else 0

    def field(self, name: str) -> object:
        return self.message.get(name) if self.message else None

    @_cached
    def provider_model(self) -> tuple[str | None, str | None]:
        provider, model = self.field("provider"), self.field("model")
        return (
            provider if isinstance(provider, str) else None,
            model if isinstance(model, str) else None,
        )

    @_cached
    def is_mirror(self) -> bool:
        """A transcript-only mirror: what the gateway delivered, not a model reply."""
        if self.role != "assistant":
            return False
        provider, model = self.provider_model
        if provider == "openclaw" and model in MIRROR_MODELS:
            return True
        mirror = self.field("openclawDeliveryMirror")
        return isinstance(mirror, dict) and bool(mirror.get("kind"))

    @_cached
    def is_error(self) -> bool:
        return self.field("stopReason") in ERROR_STOPS or bool(self.error_message)

    @_cached
    def error_message(self) -> str:
        message = self.field("errorMessage")
        return message if isinstance(message, str) else ""

    @_cached
    def usage_kind(self) -> str:
        """'absent', 'zero' or 'counted': an echo copies usage or carries none."""
        usage = self.field("usage")
        if usage is None or usage == {}:
            return "absent"
        return "zero" if _all_zero(usage) else "counted"

    @_cached
    def usage_hash(self) -> int:
        usage = self.field("usage")
        return digest64(_canonical(usage)) if usage else 0

    @_cached
    def idempotency_key(self) -> str | None:
        key = self.field("idempotencyKey")
        if not isinstance(key, str):
            legacy = self.field("__openclaw")
            key = legacy.get("idempotencyKey") if isinstance(legacy, dict) else None
        return key if isinstance(key, str) and key else None

    @_cached
    def content_fingerprint(self) -> int:
        content = self.field("content")
        return digest64(_canonical([self.role, content]))

    @_cached
    def tool_call_id(self) -> str | None:
        """The call a toolResult answers."""
        if self.role != "toolResult":
            return None
        call_id = self.field("toolCallId")
        return call_id if isinstance(call_id, str) and call_id else None

    @_cached
    def custom_type(self) -> str | None:
        custom = self.value.get("customType") if self.type == "custom" else None
        return custom if isinstance(custom, str) else None

    @_cached
    def append_mode(self) -> object:
        return self.value.get("appendMode")


def positional_scope(key: str) -> tuple[str, str] | None:
    """(scope, role) of a `scope:role:N` key, whose index shifts when a snapshot changes."""
    match = _POSITIONAL_KEY.match(key)
    return (match["scope"], match["role"]) if match else None


def _canonical(value: object) -> bytes:
    """Bytes to hash a JSON value by; the stdlib takes what orjson cannot write (huge integers
    kept by the slow parse path, lone surrogates), so such entries are kept, not dead-lettered."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")


def _all_zero(value: object) -> bool:
    if isinstance(value, dict):
        return all(_all_zero(item) for item in value.values())
    if isinstance(value, list):
        return all(_all_zero(item) for item in value)
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value == 0
    return value is None
