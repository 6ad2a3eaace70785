"""Transcript entries and records for the memory writer's tests."""

from __future__ import annotations

import itertools
from pathlib import Path

import orjson

from stream.consumers.memory_writer.files import MemoryWriter, file_name
from stream.consumers.memory_writer.render import CONVERSATION

_ids = itertools.count(1)


def message(role: str, content: object, **fields: object) -> dict:
    entry_id = fields.pop("id", None) or f"e{next(_ids):05d}"
    parent = fields.pop("parent", None)
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "message": {"role": role, "content": content, **fields},
    }


def user(text: str, **fields: object) -> dict:
    return message("user", [{"type": "text", "text": text}], **fields)


def assistant(text: str | None, thinking: str | None = None, **fields: object) -> dict:
    content: list[dict] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "thinkingSignature": "sig"})
    if text is not None:
        content.append({"type": "text", "text": text})
    fields = {
        "provider": "anthropic",
        "model": "claude-opus-4-5",
        "api": "anthropic-messages",
        "usage": {"input": 100, "output": next(_ids), "totalTokens": 200},
        "stopReason": "stop",
        **fields,
    }
    return message("assistant", content, **fields)


def mirror(text: str, **fields: object) -> dict:
    return assistant(text, provider="openclaw", model="delivery-mirror", usage={}, **fields)


def tool_result(text: str) -> dict:
    return message("toolResult", [{"type": "text", "text": text}], toolCallId="call-1")


def custom(custom_type: str = "openclaw.cache-ttl") -> dict:
    return {"type": "custom", "id": f"c{next(_ids):05d}", "customType": custom_type, "data": {}}


def raw(entry: dict) -> bytes:
    return orjson.dumps(entry)


def markdown(out: Path, session_id: str = "s-1") -> str:
    path = out / f"{file_name(session_id)}.md"
    return path.read_text() if path.exists() else ""


def conversation(out: Path, session_id: str = "s-1") -> str:
    """The file's messages and day headings: what follows its header."""
    text = markdown(out, session_id)
    _, found, rest = text.partition(CONVERSATION + "\n\n")
    assert found or not text, f"no {CONVERSATION!r} heading in {text!r}"
    return rest


def write(out: Path, entries: list[dict], session_id: str = "s-1") -> int:
    return MemoryWriter(out).write((session_id, raw(e)) for e in entries)
