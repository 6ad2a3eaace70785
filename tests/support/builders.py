"""Build OpenClaw transcript entries as JSON lines and run them through the engine.

Every builder returns a plain dict shaped like one line of an OpenClaw session file. A
`parentId` left at `AUTO` is filled in by `encode` with the id of the entry before it (the
linear transcript OpenClaw writes); pass `parent=None` or an id to say otherwise.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Sequence

from stream.engine import (
    Action,
    Alert,
    DictMemory,
    Engine,
    FileOrigin,
    Limits,
    Session,
    SessionState,
    Verdict,
)

AUTO = "<auto-parent>"
_ids = itertools.count(1)
_tokens = itertools.count(101)

THINKING_REJECTED = (
    "messages.3.content.1: `thinking` or `redacted_thinking` blocks in the latest assistant "
    "message cannot be modified. These blocks must remain as they were in the original response."
)
INVALID_SIGNATURE = "messages.1.content.0: Invalid `signature` in `thinking` block"


def new_id() -> str:
    return f"{next(_ids):08x}"


def _stamp() -> str:
    return "2026-04-05T04:22:28.629Z"


def header(session_id: str = "s1", **extra) -> dict:
    return {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": _stamp(),
        "cwd": "/home/openclaw",
        **extra,
    }


def entry(kind: str, *, id: str | None = None, parent: str | None = AUTO, **extra) -> dict:
    return {
        "type": kind,
        "id": id or new_id(),
        "parentId": parent,
        "timestamp": _stamp(),
        **extra,
    }


def message(role: str, content: object, *, id=None, parent=AUTO, entry_extra=None, **fields):
    body = {"role": role, "content": content}
    body.update({key: value for key, value in fields.items() if value is not None})
    return entry("message", id=id, parent=parent, message=body, **(entry_extra or {}))


def user(text: str = "hello there", *, id=None, parent=AUTO, idempotency_key=None, **fields):
    return message(
        "user",
        [{"type": "text", "text": text}],
        id=id,
        parent=parent,
        idempotencyKey=idempotency_key,
        **fields,
    )


def counted_usage() -> dict:
    """A usage block no other reply has: a real model call is billed on its own."""
    output = next(_tokens)
    return {"input": 1200, "output": output, "cacheRead": 0, "totalTokens": 1200 + output}


def zero_usage() -> dict:
    return {"input": 0, "output": 0, "cacheRead": 0, "totalTokens": 0, "cost": {"total": 0}}


_DEFAULT = object()


def assistant(
    text: str | None = None,
    *,
    thinking: str | None = None,
    tool_calls: Sequence[str] = (),
    provider: str = "anthropic",
    model: str = "claude-opus-4-5",
    api: str = "anthropic-messages",
    usage: object = _DEFAULT,
    parent: str | None = AUTO,
    stop_reason: str | None = None,
    error: str | None = None,
    idempotency_key: str | None = None,
    content: object = _DEFAULT,
    id: str | None = None,
    entry_extra: dict | None = None,
    **fields,
) -> dict:
    """An assistant message: blocks in OpenClaw's order thinking, text, tool calls."""
    if content is _DEFAULT:
        content = []
        if thinking is not None:
            content.append(
                {"type": "thinking", "thinking": thinking, "thinkingSignature": "EqQBCkYIBxgC"}
            )
        if text is not None:
            content.append({"type": "text", "text": text})
        for call_id in tool_calls:
            content.append(
                {"type": "toolCall", "id": call_id, "name": "exec", "arguments": {"cmd": "ls"}}
            )
    if stop_reason is None:
        stop_reason = "error" if error else ("toolUse" if tool_calls else "stop")
    return message(
        "assistant",
        content,
        id=id,
        parent=parent,
        entry_extra=entry_extra,
        api=api,
        provider=provider,
        model=model,
        usage=counted_usage() if usage is _DEFAULT else usage,
        stopReason=stop_reason,
        errorMessage=error,
        idempotencyKey=idempotency_key,
        **fields,
    )


def mirror(
    text: str,
    *,
    model: str = "delivery-mirror",
    provider: str = "openclaw",
    kind: str | None = None,
    parent: str | None = AUTO,
    idempotency_key: str | None = None,
    id: str | None = None,
    marker: dict | None = None,
    api: str = "openai-responses",
    **fields,
) -> dict:
    """A transcript-only mirror of what the gateway delivered (no model call behind it);
    `marker` adds correlation fields to its `openclawDeliveryMirror` (kind channel-final)."""
    if kind or marker:
        fields["openclawDeliveryMirror"] = {"kind": kind or "channel-final", **(marker or {})}
    return assistant(
        text,
        provider=provider,
        model=model,
        api=api,
        usage=zero_usage(),
        parent=parent,
        idempotency_key=idempotency_key,
        id=id,
        **fields,
    )


def tool_result(call_id: str, text: str = "ok", *, parent=AUTO, id=None, is_error=False):
    return message(
        "toolResult",
        [{"type": "text", "text": text}],
        id=id,
        parent=parent,
        toolCallId=call_id,
        toolName="exec",
        isError=is_error,
    )


def custom(custom_type: str = "openclaw.cache-ttl", data: object = None, *, parent=AUTO, id=None):
    if data is None:
        data = {"timestamp": 1772968929932, "provider": "anthropic", "modelId": "claude-opus-4-5"}
    return entry("custom", id=id, parent=parent, customType=custom_type, data=data)


def prompt_error(error: str, *, parent=AUTO, id=None) -> dict:
    return custom(
        "openclaw:prompt-error",
        {"runId": "run-1", "provider": "anthropic", "model": "claude-opus-4-5", "error": error},
        parent=parent,
        id=id,
    )


def encode(items: Iterable[dict | bytes | str]) -> list[bytes]:
    """JSON lines for `items`; AUTO parents name the entry before. Bytes pass as they are.

    The same dict object given twice is the same line delivered twice, byte for byte.
    """
    lines: list[bytes] = []
    previous: str | None = None
    done: dict[int, tuple[dict, bytes]] = {}  # the dict is held so that its id stays unique
    for item in items:
        if isinstance(item, bytes):
            lines.append(item)
            continue
        if isinstance(item, str):
            lines.append(item.encode())
            continue
        if id(item) in done:
            lines.append(done[id(item)][1])
            continue
        value = dict(item)
        if value.get("parentId") == AUTO:
            value["parentId"] = previous
        if value.get("type") != "session":
            previous = value.get("id")
        lines.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
        done[id(item)] = (item, lines[-1])
    return lines


def new_session(session_id: str = "s1", limits: Limits | None = None) -> Session:
    return Session(session_id, SessionState(), DictMemory((limits or Limits()).max_ids))


def process(
    engine: Engine, session: Session, lines: Sequence[bytes], path: str = "s1.jsonl", first=1
) -> list[Verdict]:
    return [
        engine.process(session, raw, FileOrigin(path, number))
        for number, raw in enumerate(lines, first)
    ]


def run(
    items: Iterable[dict | bytes | str],
    session_id: str = "s1",
    *,
    limits: Limits | None = None,
    path: str | None = None,
) -> list[Verdict]:
    """One verdict per line, from a fresh session and engine."""
    lines = encode(items)
    engine = Engine(limits)
    return process(engine, new_session(session_id, limits), lines, path or f"{session_id}.jsonl")


# --- reading verdicts -------------------------------------------------------------------------


def outputs(verdicts: Sequence[Verdict]) -> list[bytes]:
    return [v.output for v in verdicts if v.output is not None]


def kept(verdicts: Sequence[Verdict]) -> list[dict]:
    return [json.loads(line) for line in outputs(verdicts)]


def kept_ids(verdicts: Sequence[Verdict]) -> list[str | None]:
    return [value.get("id") for value in kept(verdicts)]


def all_alerts(verdicts: Sequence[Verdict]) -> list[Alert]:
    return [alert for verdict in verdicts for alert in verdict.alerts]


def alerts(verdicts: Sequence[Verdict], kind: str | None = None) -> list[Alert]:
    return [a for a in all_alerts(verdicts) if kind is None or a.kind == kind]


def alert_kinds(verdicts: Sequence[Verdict]) -> list[str]:
    return [a.kind for a in all_alerts(verdicts)]


def drops(verdicts: Sequence[Verdict]) -> dict[str, tuple[str, str | None]]:
    """entry id -> (drop rule, related entry id), read from the dropped entries' alerts."""
    found = {}
    for verdict in verdicts:
        if verdict.action is Action.DROPPED:
            (alert,) = [a for a in verdict.alerts if a.action is Action.DROPPED]
            found[alert.entry_id] = (alert.kind, alert.related_entry_id)
    return found


def dropped_ids(verdicts: Sequence[Verdict], rule: str | None = None) -> list[str]:
    return [eid for eid, (kind, _) in drops(verdicts).items() if rule is None or kind == rule]


def id_of(item: dict) -> str:
    return item["id"]


# --- an independent reading of the spec's text definitions, for cross-checks -----------------

_DIRECTIVES = re.compile(r"^(?:\s*\[\[(?:reply_to_current|reply_to:[^\]]*|audio_as_voice)\]\])+")


def normalized_text(message: dict) -> str:
    """Visible text with leading reply directives removed and whitespace collapsed."""
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(
            block["text"].strip()
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
            and block["text"].strip()
        )
    else:
        text = ""
    return " ".join(_DIRECTIVES.sub("", text).split())


MIRROR_KINDS = (
    "channel-final",
    "channel-final-suppressed",
    "message-tool-source-reply",
    "cron-direct-delivery-context",
    "subagent-completion-direct",
)


def is_mirror(message: dict) -> bool:
    mirror_field = message.get("openclawDeliveryMirror")
    return message.get("role") == "assistant" and (
        (
            message.get("provider") == "openclaw"
            and message.get("model") in ("delivery-mirror", "gateway-injected")
        )
        or (isinstance(mirror_field, dict) and mirror_field.get("kind") in MIRROR_KINDS)
    )


def assert_valid_tree(verdicts: Sequence[Verdict], dropped: Iterable[str] = ()) -> None:
    """No kept entry names a dropped entry as parent; named kept parents come earlier."""
    dropped = set(dropped) or set(dropped_ids(verdicts))
    seen: set[str] = set()
    for value in kept(verdicts):
        parent = value.get("parentId")
        assert parent not in dropped or parent in seen, value
        if value.get("type") != "session":
            seen.add(value["id"])


def parents(verdicts: Sequence[Verdict]) -> dict[str, str | None]:
    """id -> parentId of every kept entry, as it leaves the engine."""
    return {value["id"]: value.get("parentId") for value in kept(verdicts) if "id" in value}


def assert_clean_twice_is_clean(verdicts: Sequence[Verdict]) -> None:
    """Cleaning the output again drops nothing and changes no byte."""
    again = run(outputs(verdicts))
    assert not drops(again)
    assert outputs(again) == outputs(verdicts)
