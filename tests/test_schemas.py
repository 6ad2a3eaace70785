"""The JSON Schemas in `schemas/` against real input and against everything the engine emits.

* Each schema is a valid draft 2020-12 schema with an `$id`, a title and a description of
  every field.
* Every line of every fixture and corpus session is a valid entry.
* Every alert, dead letter and cleaned line the engine produces (real sessions, synthetic
  sessions that trigger every alert kind, file and Kafka sources) is valid.
* The alert schema's `kind` enum is exactly the set of kinds the synthetic sessions raise,
  so the enum cannot drift from the code.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from jsonschema import Draft202012Validator

from stream.commands.clean import clean_session
from stream.engine import (
    DROP_RULES,
    Action,
    DictMemory,
    Engine,
    KafkaOrigin,
    Session,
    SessionState,
    Verdict,
)
from stream.engine.engine import dead_letter_verdict
from stream.sources.session_files import open_lines, session_id_of

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "schemas"
DATA = ROOT / "tests" / "data"
FIXTURES = DATA / "fixtures"
CORPUS = DATA / "corpus"

SCHEMA_FILES = ("entry.schema.json", "alert.schema.json", "dead-letter.schema.json")


def load_schema(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text(encoding="utf-8"))


ENTRY = Draft202012Validator(load_schema("entry.schema.json"))
ALERT = Draft202012Validator(load_schema("alert.schema.json"))
DEAD_LETTER = Draft202012Validator(load_schema("dead-letter.schema.json"))
KINDS = frozenset(ALERT.schema["properties"]["kind"]["enum"])


def errors(validator: Draft202012Validator, instance: object) -> list[str]:
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in validator.iter_errors(instance)
    ]


# --- the schemas themselves -------------------------------------------------------------------


@pytest.mark.parametrize("name", SCHEMA_FILES)
def test_schema_is_valid_draft_2020_12(name):
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] and schema["title"] and schema["description"]


def _undescribed(node: object, path: str) -> Iterator[str]:
    """Properties without a description, outside `if` conditions (which only select)."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _undescribed(item, f"{path}/{index}")
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key == "if":
            continue
        if key == "properties" and isinstance(value, dict):
            for name, sub in value.items():
                if not (isinstance(sub, dict) and sub.get("description")):
                    yield f"{path}/properties/{name}"
        yield from _undescribed(value, f"{path}/{key}")


@pytest.mark.parametrize("name", SCHEMA_FILES)
def test_schema_examples_are_valid(name):
    schema = load_schema(name)
    validator = Draft202012Validator(schema)
    for example in schema.get("examples", []):
        assert errors(validator, example) == []


@pytest.mark.parametrize("name", SCHEMA_FILES)
def test_every_field_is_described(name):
    assert list(_undescribed(load_schema(name), "#")) == []


# --- input: real session lines ----------------------------------------------------------------


def fixture_files() -> list[Path]:
    return sorted(FIXTURES.glob("*.jsonl*")) if FIXTURES.is_dir() else []


def corpus_files() -> list[Path]:
    return sorted(CORPUS.rglob("*.jsonl*")) if CORPUS.is_dir() else []


def real_files() -> list[Path]:
    return fixture_files() + corpus_files()


def _ids(paths: list[Path]) -> list[str]:
    return [str(path.relative_to(DATA)) for path in paths]


needs_real_files = pytest.mark.skipif(
    not real_files(), reason=f"no fixtures or corpus under {DATA}"
)


@needs_real_files
def test_the_real_files_are_all_there():
    assert len(fixture_files()) >= 8
    assert len(corpus_files()) >= 50


@needs_real_files
@pytest.mark.parametrize("path", real_files(), ids=_ids(real_files()))
def test_every_real_line_is_a_valid_entry(path):
    count = 0
    for number, raw in open_lines(path):
        found = errors(ENTRY, json.loads(raw))
        assert found == [], f"{path.name}:{number}: {found}"
        count += 1
    assert count > 0


# --- output: verdicts ---------------------------------------------------------------------------


def decoded_raw(letter: dict) -> bytes:
    if letter["raw_encoding"] == "base64":
        return base64.b64decode(letter["raw"], validate=True)
    return letter["raw"].encode("utf-8")


def check_verdict(verdict: Verdict, raw: bytes) -> None:
    """Every record of the verdict is valid, as built (`as_json`) and as written (`to_bytes`)."""
    for alert in verdict.alerts:
        as_written = orjson.loads(alert.to_bytes())
        assert as_written == alert.as_json()
        assert errors(ALERT, as_written) == [], as_written
    if verdict.output is not None:
        assert errors(ENTRY, orjson.loads(verdict.output)) == [], verdict.output
    letter = verdict.dead_letter
    if verdict.action is Action.DEAD_LETTERED:
        assert letter is not None
        as_written = orjson.loads(letter.to_bytes())
        assert as_written == letter.as_json()
        assert errors(DEAD_LETTER, as_written) == [], as_written
        assert decoded_raw(as_written) == raw  # the record unchanged
        (alert,) = verdict.alerts
        assert alert.kind == "malformed_entry"
        assert alert.as_json()["source"] == as_written["source"]
    else:
        assert letter is None


def clean(session_id: str, path: str, lines: list[tuple[int, bytes]]) -> list[Verdict]:
    verdicts = list(clean_session(Engine(), session_id, path, lines))
    for (_, raw), verdict in zip(lines, verdicts, strict=True):
        check_verdict(verdict, raw)
    return verdicts


def kinds_of(verdicts: list[Verdict]) -> set[str]:
    return {alert.kind for verdict in verdicts for alert in verdict.alerts}


@needs_real_files
@pytest.mark.parametrize("path", real_files(), ids=_ids(real_files()))
def test_engine_output_on_real_sessions_is_valid(path):
    lines = list(open_lines(path))
    session_id = session_id_of(path, lines[0][1] if lines else None)
    verdicts = clean(session_id, str(path), lines)
    assert kinds_of(verdicts) <= KINDS


# --- synthetic sessions that raise every kind ---------------------------------------------------

TS = "2026-04-05T04:22:28.629Z"
TEXT = "Done. The report is in ~/reports/weekly.md and I emailed it to the team."
THINKING_REJECTED = (
    "messages.3.content.1: `thinking` or `redacted_thinking` blocks in the latest assistant "
    "message cannot be modified. These blocks must remain as they were in the original response."
)
INVALID_SIGNATURE = "messages.1.content.0: Invalid `signature` in `thinking` block"


def dump(value: dict) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def header(session_id: str) -> dict:
    return {"type": "session", "version": 3, "id": session_id, "timestamp": TS, "cwd": "/srv"}


def entry(kind: str, entry_id: str, parent: str | None, **fields) -> dict:
    return {"type": kind, "id": entry_id, "parentId": parent, "timestamp": TS, **fields}


_CLOCK = itertools.count(1775362948629, 1000)


def message(entry_id: str, parent: str | None, role: str, content: object, **fields) -> dict:
    # each message a second after the one before: the same text sent again is a new message,
    # the same payload persisted again (`persisted_copy`) is a copy
    body = {"role": role, "content": content, **fields, "timestamp": next(_CLOCK)}
    return entry("message", entry_id, parent, message=body)


def user(entry_id: str, parent: str | None, text: str = "please do it", **fields) -> dict:
    return message(entry_id, parent, "user", [{"type": "text", "text": text}], **fields)


USAGE = {
    "input": 1200,
    "output": 80,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 1280,
    "cost": {"input": 0.01, "output": 0.002, "cacheRead": 0, "cacheWrite": 0, "total": 0.012},
}
ZERO_USAGE = {
    "input": 0,
    "output": 0,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 0,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


def reply(
    entry_id: str,
    parent: str | None,
    text: str | None = None,
    *,
    thinking: str | None = None,
    calls: tuple[str, ...] = (),
    provider: str = "anthropic",
    model: str = "claude-opus-4-5",
    api: str = "anthropic-messages",
    usage: dict | None = USAGE,
    error: str | None = None,
    **fields,
) -> dict:
    content: list[dict] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "thinkingSignature": "EqQBCkYI"})
    if text is not None:
        content.append({"type": "text", "text": text})
    content += [
        {"type": "toolCall", "id": call, "name": "exec", "arguments": {"cmd": "ls"}}
        for call in calls
    ]
    body: dict = {"api": api, "provider": provider, "model": model}
    if usage is not None:
        body["usage"] = usage
    body["stopReason"] = "error" if error else ("toolUse" if calls else "stop")
    if error:
        body["errorMessage"] = error
    return message(entry_id, parent, "assistant", content, **body, **fields)


def mirror(entry_id: str, parent: str | None, text: str, **fields) -> dict:
    return reply(
        entry_id,
        parent,
        text,
        provider="openclaw",
        model="delivery-mirror",
        api="openai-responses",
        usage=ZERO_USAGE,
        **fields,
    )


def tool_result(entry_id: str, parent: str | None, call_id: str) -> dict:
    content = [{"type": "text", "text": "ok"}]
    return message(
        entry_id, parent, "toolResult", content, toolCallId=call_id, toolName="exec", isError=False
    )


def custom(entry_id: str, parent: str | None, custom_type: str, data: dict) -> dict:
    return entry("custom", entry_id, parent, customType=custom_type, data=data)


def storm_turns() -> list[dict]:
    items: list[dict] = []
    parent = None
    for turn in range(3):
        text = f"{TEXT} (turn {turn})"
        items += [
            user(f"u{turn}", parent),
            reply(f"a{turn}", f"u{turn}", text),
            mirror(f"m{turn}", f"a{turn}", text),
        ]
        parent = f"a{turn}"
    return items


_A1 = reply("a1", "u1", TEXT)
_POSITIONAL_USER = user("u1", None, "hi", idempotencyKey="agent:main:main:user:0")
UNIT = "The same paragraph, again and again. "
_TWICE = reply("a1", "u1", TEXT, responseId="resp-1")  # persisted again below itself
_CALLER = reply("a1", "u1", "Listing.", calls=("toolu_01ABCDEFGHJKLMNOP",))
_RESULT = message("r1", "a1", "toolResult", [{"type": "text", "text": "a b"}],
                  toolCallId="toolu_01ABCDEFGHJKLMNOP", toolName="exec", isError=False)
_INBOUND = user("u1", None, __openclaw={"transport": {
    "channel": "telegram", "conversationRef": "conv_c6432d8e", "messageId": "4242"}})
_KEYED = user("u1", None, idempotencyKey="run-1:user")
_ANNOUNCE = ("[System Message] [sessionId: 0c0ffee0] A subagent task \"summarize logs\" just "
             "completed successfully.\n\nResult:\n3 errors found.\n\nStats: runtime 1m5s")


def _again(original: dict, entry_id: str, parent: str) -> dict:
    """The same message under a new id and parent."""
    return {**original, "id": entry_id, "parentId": parent}

# name -> (the kinds it must raise, the session's lines after its header)
SYNTHETIC: dict[str, tuple[set[str], list[dict | bytes]]] = {
    "delivery-mirror": (
        {"delivery_mirror_duplicate"},
        [user("u1", None), reply("a1", "u1", TEXT, thinking="t"), mirror("m1", "a1", TEXT)],
    ),
    "mirror-by-kind": (
        {"delivery_mirror_duplicate"},
        [
            user("u1", None),
            reply("a1", "u1", TEXT),
            reply("m1", "a1", TEXT, openclawDeliveryMirror={"kind": "channel-final"}),
        ],
    ),
    "cli-copy": (
        {"cli_mirror_duplicate"},
        [
            user("u1", None),
            reply("a1", "u1", TEXT, thinking="t"),
            custom("c1", "a1", "openclaw.cache-ttl", {"timestamp": 1, "provider": "anthropic"}),
            reply("a2", "c1", TEXT, api="cli", provider="claude-cli", model="opus"),
        ],
    ),
    "cleaned-child": (
        {"cleaned_child_duplicate"},
        [user("u1", None), reply("a1", "u1", TEXT, thinking="t"), reply("a2", "a1", TEXT)],
    ),
    "mistagged-echo": (
        {"mistagged_echo"},
        [
            user("u1", None),
            reply("a1", "u1", TEXT, thinking="t"),
            custom("c1", "a1", "openclaw.cache-ttl", {"timestamp": 1, "provider": "anthropic"}),
            # below the reply it echoes: one below the user message answers it (`mistagged_echo`)
            reply("a2", "c1", TEXT, usage=None),
        ],
    ),
    "redelivery-and-conflict": (
        {"redelivery", "entry_id_conflict"},
        [user("u1", None), _A1, _A1, reply("a1", "u1", "Something else entirely.")],
    ),
    "idempotency-key": (
        {"idempotent_replay", "idempotency_key_collision"},
        [
            user("u1", None, "send it", idempotencyKey="run-1"),
            reply("a1", "u1", TEXT),
            user("u2", "a1", "send it", idempotencyKey="run-1"),
            user("u3", "a1", "send something else", idempotencyKey="run-1"),
        ],
    ),
    "legacy-idempotency-key": (
        {"idempotent_replay"},
        [
            user("u1", None, "send it", __openclaw={"idempotencyKey": "legacy-1"}),
            user("u2", "u1", "send it", __openclaw={"idempotencyKey": "legacy-1"}),
        ],
    ),
    "positional-keys": (
        {"positional_idempotency_key", "idempotent_replay", "idempotency_key_collision"},
        [
            _POSITIONAL_USER,
            reply("a1", "u1", TEXT, idempotencyKey="agent:main:main:assistant:1"),
            # the same turn re-mirrored after the snapshot gained a record: shifted keys
            reply("a1b", "u1", TEXT, idempotencyKey="agent:main:main:assistant:2"),
            # a reused positional key with new content
            reply("a2", "a1", "A new reply.", idempotencyKey="agent:main:main:assistant:1"),
        ],
    ),
    "repetition": (
        {"repetition_cascade"},
        [user("u1", None), reply("a1", "u1", (UNIT * 4).strip())],
    ),
    "storm": ({"duplicate_storm", "delivery_mirror_duplicate"}, storm_turns()),
    "consecutive": (
        {"consecutive_assistant"},
        [
            user("u1", None),
            reply("a1", "u1", "First reply."),
            reply("a2", "a1", "Second reply."),
            user("u2", "a2"),
            reply("a3", "u2", "Third reply.", thinking="t"),
            reply("a4", "a3", "Fourth reply."),
        ],
    ),
    "thinking-rejection": (
        {"thinking_rejection_loop"},
        [
            user("u1", None),
            reply("a1", "u1", error=THINKING_REJECTED),
            user("u2", "a1"),
            reply("a2", "u2", error=THINKING_REJECTED),
        ],
    ),
    "thinking-rejection-prompt-error": (
        {"thinking_rejection_loop"},
        [
            user("u1", None),
            custom("p1", "u1", "openclaw:prompt-error", {"runId": "r", "error": INVALID_SIGNATURE}),
            user("u2", "p1"),
            custom("p2", "u2", "openclaw:prompt-error", {"runId": "r", "error": INVALID_SIGNATURE}),
        ],
    ),
    "error-loop": (
        {"error_loop"},
        [
            user("u1", None),
            reply("a1", "u1", error="529 overloaded_error"),
            user("u2", "a1"),
            reply("a2", "u2", error="529 overloaded_error"),
            user("u3", "a2"),
            reply("a3", "u3", error="529 overloaded_error"),
        ],
    ),
    "dangling-parent": (
        {"dangling_parent"},
        [user("u1", None), reply("a1", "ghost", TEXT)],
    ),
    "branch-fork": (
        {"branch_fork"},
        [user("u1", None), reply("a1", "u1", "One answer."), reply("a2", "u1", "Another.")],
    ),
    "orphaned-tool-call": (
        {"orphaned_tool_call"},
        [user("u1", None), reply("a1", "u1", calls=("call-1", "call-2")), user("u2", "a1")],
    ),
    "unknown-tool-result": (
        {"unknown_tool_result"},
        [user("u1", None), tool_result("r1", "u1", "call-never-made")],
    ),
    "announce-retry": (
        {"announce_retry_duplicate"},
        [
            user("w1", None, "[Subagent Context] done", idempotencyKey="announce:settle:run-b"),
            reply("a1", "w1", TEXT),
            user("w2", "a1", "[Subagent Context] done",
                 idempotencyKey="announce:settle:run-b:retry-1"),
        ],
    ),
    "rewrite-copy": (
        {"rewrite_copy"},
        [
            user("u1", None),
            reply("a1", "u1", calls=("call-1",)),
            tool_result("t1", "a1", "call-1"),
            _A2 := reply("a2", "t1", TEXT),
            # an overflow recovery: the result again beside the original, then the reply
            {**tool_result("t1b", "a1", "call-1"), "appendMode": "side"},
            {**_A2, "id": "a2b", "parentId": "t1b"},
        ],
    ),
    "persisted-copy": (
        {"persisted_copy"},
        [
            _U1 := user("u1", None, "what is on tomorrow?"),
            reply("a1", "u1", usage=ZERO_USAGE, error="LLM idle timeout (60s)"),
            # the same message persisted again after the idle-timeout abort (#128472)
            {**_U1, "id": "u1b", "parentId": "a1"},
            reply("a2", "u1b", TEXT),
        ],
    ),
    "silent-turn-replay": (
        {"silent_turn_replay"},
        [
            user("u1", None),
            reply("a1", "u1", TEXT),
            user("h1", "a1", "HEARTBEAT", provenance={"kind": "internal_system",
                                                      "sourceTool": "heartbeat"}),
            reply("a2", "h1", "NO_REPLY"),
            mirror("m1", "a2", TEXT, openclawDeliveryMirror={"kind": "channel-final"}),
        ],
    ),
    "cli-aggregate": (
        {"cli_aggregate_duplicate"},
        [
            user("u1", None),
            reply("a1", "u1", "Let me look.", calls=("call-1",)),
            tool_result("t1", "a1", "call-1"),
            reply("a2", "t1", TEXT),
            reply("a3", "a2", f"Let me look.\n\n{TEXT}", api="cli", provider="claude-cli"),
        ],
    ),
    "cli-reimport": (
        {"cli_reimport_duplicate"},
        [
            user("u1", None),
            reply("a1", "u1", TEXT, api="cli", provider="claude-cli",
                  idempotencyKey="cli-assistant:run-1"),
            reply("a2", "a1", TEXT, provider="claude-cli",
                  __openclaw={"importedFrom": "claude-cli", "externalId": "x"}),
        ],
    ),
    "retried-prompt": (
        {"retried_prompt"},
        [
            user("u1", None),
            reply("a1", "u1", usage=ZERO_USAGE, error="LLM idle timeout (120s)"),
            user("u2", "a1"),
        ],
    ),
    "uncorrelated-final": (
        {"uncorrelated_mirror_copy"},
        [
            user("u1", None),
            reply("a1", "u1", TEXT),
            custom("c1", "a1", "openclaw.cache-ttl", {"timestamp": 1, "provider": "anthropic"}),
            mirror("m1", "c1", TEXT, openclawDeliveryMirror={"kind": "channel-final",
                                                            "sourceMessageId": "tg-1"}),
        ],
    ),
    "codex-prompt": (
        {"codex_prompt_mirror"},
        [
            user("u1", None, __openclaw={"idempotencyKey": "chatcmpl-1:user"}),
            user("u2", "u1", idempotencyKey="codex-app-server:thr-1:turn-1:prompt",
                 __openclaw={"mirrorIdentity": "turn-1:prompt"}),
            reply("a1", "u2", TEXT),
        ],
    ),
    "same-response": (
        {"same_response", "identity_conflict"},
        [
            user("u1", None),
            _TWICE,
            {**_TWICE, "id": "a2", "parentId": "a1"},
            {**_TWICE, "id": "a3", "parentId": "a1",
             "message": {**_TWICE["message"], "content": [{"type": "text", "text": "Other."}]}},
        ],
    ),
    "same-tool-calls-and-results": (
        {"same_tool_calls", "same_tool_result"},
        [
            user("u1", None),
            _CALLER,
            _RESULT,
            _again(_CALLER, "a2", "r1"),
            _again(_RESULT, "r2", "a2"),
        ],
    ),
    "same-inbound": (
        {"same_inbound"},
        [
            _INBOUND,
            reply("a1", "u1", TEXT),
            _again(_INBOUND, "u2", "a1"),
        ],
    ),
    "same-announce": (
        {"same_announce"},
        [
            user("u1", None, _ANNOUNCE),
            reply("a1", "u1", TEXT),
            user("u2", "a1", "[Queued announce messages while agent was busy]\n\n---\n"
                 "Queued #1\n" + _ANNOUNCE),
        ],
    ),
    "rewritten-in-place": (
        {"rewritten_in_place"},
        [
            _KEYED,
            reply("a1", "u1", TEXT),
            {**_KEYED, "message": {**_KEYED["message"],
                                   "__openclaw": {"mirrorIdentity": "turn-3:prompt"}}},
        ],
    ),
    "repeated-answer": (
        {"repeated_answer"},
        [
            user("u1", None),
            reply("a1", "u1", TEXT),
            user("u2", "a1", "[Internal task completion event] done",
                 idempotencyKey="announce:codex-native:thr-1:thr-2:succeeded:user"),
            reply("a2", "u2", TEXT, usage={**USAGE, "output": 81}),
        ],
    ),
    "midway": (
        {"session_seen_midway"},
        [reply("a1", "u0", TEXT), user("u1", "a1")],
    ),
    "malformed": (
        {"malformed_entry"},
        [
            user("u1", None),
            b"this is not JSON",
            b"[1, 2, 3]",
            b'"a string"',
            b'{"id": "x1", "parentId": "u1"}',
            b'{"type": 7, "id": "x2"}',
            b'{"type": "message", "parentId": "u1", "message": {"role": "user"}}',
            b'{"type": "message", "id": "", "message": {"role": "user"}}',
            b'{"type": "custom", "id": 12}',
            b'{"type": "message", "id": "x3", "message": {"role": "user", "content": "\xff\xfe"}}',
            b"\xff\xfe\x00\x01 binary garbage \x80",
            b'{"type": "message", "id": "x4", "message": {"role": "user", "content": [NaN]}}',
        ],
    ),
}


# sessions seen from an entry after their header, as a worker meets them after a fresh broker
WITHOUT_HEADER = {"midway"}


def synthetic_lines(name: str) -> list[tuple[int, bytes]]:
    _, items = SYNTHETIC[name]
    encoded = [item if isinstance(item, bytes) else dump(item) for item in items]
    start = [] if name in WITHOUT_HEADER else [dump(header(f"s-{name}"))]
    return list(enumerate([*start, *encoded], 1))


@pytest.mark.parametrize("name", list(SYNTHETIC))
def test_synthetic_session_output_is_valid(name):
    expected, _ = SYNTHETIC[name]
    lines = synthetic_lines(name)
    verdicts = clean(f"s-{name}", f"{name}.jsonl", lines)
    assert expected <= kinds_of(verdicts)
    # What the engine dead-letters is not a valid entry; everything else here is one.
    for (_, raw), verdict in zip(lines, verdicts, strict=True):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            assert verdict.action is Action.DEAD_LETTERED
            continue
        assert ENTRY.is_valid(value) is (verdict.action is not Action.DEAD_LETTERED), raw


def test_synthetic_sessions_raise_exactly_the_schema_kinds():
    raised: set[str] = set()
    for name in SYNTHETIC:
        raised |= kinds_of(clean(f"s-{name}", f"{name}.jsonl", synthetic_lines(name)))
    assert raised == KINDS
    assert set(DROP_RULES) <= KINDS


def test_non_utf8_line_is_dead_lettered_as_base64():
    raw = b"\xff\xfe\x00\x01 binary garbage \x80"
    (verdict,) = clean("s-bytes", "bytes.jsonl", [(1, raw)])
    letter = orjson.loads(verdict.dead_letter.to_bytes())
    assert letter["raw_encoding"] == "base64"
    assert base64.b64decode(letter["raw"]) == raw


def test_drop_and_dead_letter_kinds_carry_their_action():
    """The schema ties each kind to its action; the drop rules are the engine's."""
    actions = {}
    for condition in ALERT.schema["allOf"]:
        kind = condition["if"]["properties"]["kind"]["const"]
        actions[kind] = condition["then"]["properties"]["action"]["const"]
    assert set(actions) == KINDS
    assert {kind for kind, action in actions.items() if action == "dropped"} == set(DROP_RULES)
    assert {kind for kind, action in actions.items() if action == "dead_lettered"} == {
        "malformed_entry"
    }


# --- Kafka sources ------------------------------------------------------------------------------


def test_kafka_source_alert_is_valid():
    source = KafkaOrigin("t", 0, 5)
    verdict = dead_letter_verdict("s1", b"not json", source, "not JSON: unexpected character")
    check_verdict(verdict, b"not json")
    (alert,) = verdict.alerts
    assert alert.as_json()["source"] == {"topic": "t", "partition": 0, "offset": 5}


def test_kafka_sourced_session_output_is_valid():
    engine = Engine()
    session = Session("s-kafka", SessionState(), DictMemory(engine.limits.max_ids))
    items = [header("s-kafka"), *SYNTHETIC["delivery-mirror"][1], *SYNTHETIC["malformed"][1]]
    kinds: set[str] = set()
    for offset, item in enumerate(items, 5):
        raw = item if isinstance(item, bytes) else dump(item)
        verdict = engine.process(session, raw, KafkaOrigin("t", 0, offset))
        check_verdict(verdict, raw)
        for alert in verdict.alerts:
            assert alert.as_json()["source"] == {"topic": "t", "partition": 0, "offset": offset}
            kinds.add(alert.kind)
    assert {"delivery_mirror_duplicate", "malformed_entry"} <= kinds


def test_streaming_dead_letter_without_key_or_value_is_valid():
    """What the worker writes for a record with no key (empty session id) and no value."""
    verdict = dead_letter_verdict("", b"", KafkaOrigin("t", 3, 0), "record has no key")
    check_verdict(verdict, b"")


# --- the schemas reject what is not the format ----------------------------------------------------

GOOD_ALERT = {
    "id": "0123456789abcdef",
    "kind": "branch_fork",
    "severity": "info",
    "session_id": "s1",
    "entry_id": "a2",
    "related_entry_id": "u1",
    "action": "kept",
    "message": "entry a2 starts a second branch under u1 (first child a1)",
    "evidence": {"parent_id": "u1", "first_child_id": "a1"},
    "source": {"file": "s1.jsonl", "line": 4},
}


@pytest.mark.parametrize(
    "change",
    [
        {"id": "0123456789ABCDEF"},
        {"id": "0123456789abcde"},
        {"kind": "made_up_kind"},
        {"severity": "error"},
        {"severity": "warning"},  # branch_fork is always info
        {"action": "dropped"},  # branch_fork keeps the entry
        {"entry_id": 7},
        {"evidence": {"parent_id": "u1"}},
        {"source": {"file": "s1.jsonl", "line": 0}},
        {"source": {"topic": "t", "partition": 0}},
        {"source": {"file": "s1.jsonl", "line": 4, "topic": "t", "partition": 0, "offset": 1}},
        {"extra": 1},
    ],
)
def test_alert_schema_rejects(change):
    assert ALERT.is_valid(GOOD_ALERT)
    assert not ALERT.is_valid({**GOOD_ALERT, **change})


def test_alert_schema_accepts_a_kafka_source():
    assert ALERT.is_valid({**GOOD_ALERT, "source": {"topic": "t", "partition": 0, "offset": 5}})


@pytest.mark.parametrize(
    "letter",
    [
        {"session_id": "s", "source": {"file": "f", "line": 1}, "reason": "r", "raw": "x"},
        {
            "session_id": "s",
            "source": {"file": "f", "line": 1},
            "reason": "r",
            "raw": "not base64!",
            "raw_encoding": "base64",
        },
        {
            "session_id": "s",
            "source": {"file": "f", "line": 1},
            "reason": "r",
            "raw": "x",
            "raw_encoding": "latin-1",
        },
    ],
)
def test_dead_letter_schema_rejects(letter):
    assert not DEAD_LETTER.is_valid(letter)


@pytest.mark.parametrize(
    "value",
    [
        {"type": "session", "version": 3},
        {"type": "a_future_entry_type", "id": "e1", "anything": {"goes": [1, 2]}},
        {"type": "message", "id": "e1", "message": {"role": "narrator", "content": "hi"}},
        {
            "type": "message",
            "id": "e1",
            "parentId": None,
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "redacted_thinking", "data": "abc"},
                    {"type": "tool_use", "id": "t1", "name": "exec", "input": {}},
                    {"type": "image", "data": "iVBOR", "mimeType": "image/png"},
                    {"type": "a_future_block", "payload": 1},
                ],
                "openclawDeliveryMirror": {"kind": "channel-final", "sourceMessageId": "m"},
                "__openclaw": {"idempotencyKey": "k"},
            },
        },
    ],
)
def test_entry_schema_accepts_what_passes_through(value):
    assert errors(ENTRY, value) == []


@pytest.mark.parametrize(
    "value",
    [
        {"id": "e1"},
        {"type": "message"},
        {"type": "message", "id": ""},
        {"type": "message", "id": "e1"},
        {"type": "message", "id": "e1", "parentId": 3, "message": {"role": "user"}},
        {"type": "message", "id": "e1", "message": {"content": "no role"}},
        {"type": "message", "id": "e1", "message": {"role": "user", "content": [{"text": "x"}]}},
        {"type": "message", "id": "e1", "message": {"role": "user", "content": 5}},
    ],
)
def test_entry_schema_rejects(value):
    assert not ENTRY.is_valid(value)
