"""Lines that are not entries go to the dead letters unchanged; odd but valid entries pass."""

from __future__ import annotations

import base64
import json

import pytest

from stream.engine import (
    Action,
    Engine,
    FileOrigin,
    Memory,
    Session,
    SessionState,
    Severity,
)
from tests.support.builders import (
    assistant,
    custom,
    drops,
    encode,
    header,
    kept,
    message,
    mirror,
    outputs,
    process,
    run,
    user,
)

TEXT = "I moved the meeting to Thursday and told everyone."
DEEP = b'{"type":"custom","id":"deep1","data":' + b"[" * 10_000 + b"]" * 10_000 + b"}"

BAD_LINES = {
    "not-json": (b"{this is not json", "not JSON"),
    "truncated": (b'{"type":"message","id":"x1","message":{"role":"user"', "not JSON"),
    "array": (b'[{"type":"message","id":"x1"}]', "not a JSON object but list"),
    "string": (b'"a string"', "not a JSON object but str"),
    "number": (b"42", "not a JSON object but int"),
    "no-type": (b'{"id":"x1","message":{"role":"user","content":"hi"}}', "no string 'type'"),
    "type-not-string": (b'{"type":7,"id":"x1"}', "no string 'type'"),
    "no-id": (b'{"type":"message","message":{"role":"user","content":"hi"}}', "no string 'id'"),
    "id-not-string": (b'{"type":"message","id":17,"message":{}}', "no string 'id'"),
    "empty-id": (b'{"type":"message","id":"","message":{}}', "no string 'id'"),
    "invalid-utf8": (b'{"type":"message","id":"x1","message":{"content":"caf\xe9"}}', "not UTF-8"),
    "nan": (b'{"type":"message","id":"x1","usage":{"cost":NaN}}', "not JSON"),
    "infinity": (b'{"type":"message","id":"x1","usage":{"cost":-Infinity}}', "not JSON"),
    "deep-nesting": (DEEP, "not JSON"),
}


def session_around(bad: bytes):
    """A reply and its mirror with the bad line between them: the run must go on."""
    return [header(), user(), assistant(TEXT), bad, mirror(TEXT)]


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_bad_line_is_dead_lettered_with_its_reason_and_the_run_goes_on(name):
    raw, reason = BAD_LINES[name]
    verdicts = run(session_around(raw))
    verdict = verdicts[3]
    assert verdict.action is Action.DEAD_LETTERED
    assert verdict.output is None
    letter = verdict.dead_letter
    assert letter.raw == raw
    assert letter.session_id == "s1"
    assert letter.source == FileOrigin("s1.jsonl", 4)
    assert letter.reason.startswith(reason), letter.reason
    (alert,) = verdict.alerts
    assert alert.kind == "malformed_entry"
    assert alert.severity is Severity.WARNING
    assert alert.action is Action.DEAD_LETTERED
    assert alert.source == FileOrigin("s1.jsonl", 4)
    assert alert.evidence["reason"] == letter.reason
    # the state was not touched: the mirror still repeats the reply before the bad line
    assert verdicts[4].drop_rule == "delivery_mirror_duplicate"
    assert len(kept(verdicts)) == 3


def test_dead_letter_json_keeps_the_raw_line_exactly():
    raw = BAD_LINES["not-json"][0]
    record = run([raw])[0].dead_letter.as_json()
    assert record == {
        "session_id": "s1",
        "source": {"file": "s1.jsonl", "line": 1},
        "reason": record["reason"],
        "raw": raw.decode(),
        "raw_encoding": "utf-8",
    }
    assert json.loads(run([raw])[0].dead_letter.to_bytes())["raw"].encode() == raw


def test_dead_letter_of_invalid_utf8_is_base64():
    raw = BAD_LINES["invalid-utf8"][0]
    record = json.loads(run([raw])[0].dead_letter.to_bytes())
    assert record["raw_encoding"] == "base64"
    assert base64.b64decode(record["raw"]) == raw


def test_malformed_alert_ids_are_deterministic_and_distinct():
    lines = [b"{", b"}", b"{"]
    first, second = run(lines), run(lines)
    ids = [v.alerts[0].id for v in first]
    assert ids == [v.alerts[0].id for v in second]
    assert ids[0] != ids[1]


def test_a_header_without_id_is_kept():
    raw = b'{"type":"session","version":3,"cwd":"/tmp"}'
    (verdict,) = run([raw])
    assert verdict.action is Action.KEPT
    assert verdict.output == raw


# --- odd but valid entries pass through ---------------------------------------------------------

BIG = 10**400  # beyond a double: orjson cannot read it at all
WIDE = 2**70  # beyond 64 bits: orjson reads it as a float


@pytest.mark.parametrize("number", [BIG, WIDE, -WIDE], ids=["1e400", "2^70", "-2^70"])
def test_huge_integers_are_kept_byte_for_byte(number):
    reply = assistant(TEXT, usage={"input": number, "output": 1}, counter=number)
    content = [{"type": "text", "text": "hi", "weight": number}]
    u = message("user", content, idempotencyKey="k-1", nonce=number)
    lines = encode([header(), u, reply])
    verdicts = run(lines)
    assert outputs(verdicts) == lines


@pytest.mark.parametrize("number", [BIG, WIDE], ids=["1e400", "2^70"])
def test_a_reparented_entry_keeps_its_huge_integers(number):
    reply = assistant(TEXT)
    m = mirror(TEXT)
    child = {"type": "custom", "id": "c1", "parentId": m["id"], "data": {"n": number}}
    verdicts = run([header(), user(), reply, m, child])
    assert list(drops(verdicts)) == [m["id"]]
    out = verdicts[4].output
    assert json.loads(out) == {**child, "parentId": reply["id"]}
    assert str(number).encode() in out


def test_a_reparented_entry_keeps_unicode_and_escapes_meaning():
    reply = assistant(TEXT)
    m = mirror(TEXT)
    child = {"type": "label", "id": "l1", "parentId": m["id"], "label": 'Café ☕ \\ " \u2028'}
    verdicts = run([header(), user(), reply, m, child])
    assert json.loads(verdicts[4].output) == {**child, "parentId": reply["id"]}


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "text", "text": 42}],
        [{"type": "text", "text": {"nested": TEXT}}],
        [{"type": "text"}],
        [{"type": "text", "text": None}, "a bare string", 7, None],
        [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}],
        [{"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}],
        [{"type": "redacted_thinking", "data": "opaque"}],
        {"unexpected": "object"},
        12,
        None,
    ],
    ids=[
        "text-int",
        "text-object",
        "text-missing",
        "mixed-junk",
        "image",
        "tool_use",
        "redacted_thinking",
        "object",
        "number",
        "null",
    ],
)
def test_unknown_content_shapes_pass_as_unknown(content):
    odd = assistant(content=content, parent=None)
    echo = mirror("", parent=odd["id"])
    lines = encode([header(), user(), odd, echo, mirror(TEXT)])
    verdicts = run(lines)
    assert outputs(verdicts) == lines
    assert not any(v.dead_letter for v in verdicts)


@pytest.mark.parametrize(
    ("field", "value"),
    [("stopReason", ["error"]), ("stopReason", {"a": 1}), ("usage", [0, {}]), ("model", 7)],
)
def test_odd_field_types_in_a_reply_are_kept_and_it_is_still_compared(field, value):
    odd = assistant(TEXT, parent=None)
    odd["message"][field] = value
    odd["message"]["content"].append({"type": ["thinking"], "thinking": "x"})
    lines = encode([header(), user(), odd, mirror(TEXT)])
    verdicts = run(lines)
    assert [v.action for v in verdicts] == [Action.KEPT] * 3 + [Action.DROPPED]
    assert outputs(verdicts) == lines[:3]


def test_unknown_entry_types_and_fields_pass_through_untouched():
    odd = {
        "type": "brand_new_entry_kind",
        "id": "n1",
        "parentId": None,
        "payload": {"a": [1, 2.5, True, None]},
        "zz": "unknown field",
    }
    msg = user("hi")
    msg["message"]["unknownField"] = {"x": 1}
    msg["extra"] = [1, 2]
    lines = encode([header(), odd, msg])
    lines[1] = lines[1].replace(b",", b" ,  ")
    verdicts = run(lines)
    assert outputs(verdicts) == lines


def test_lone_surrogate_escapes_are_valid_json_and_kept():
    raw = b'{"type":"message","id":"u1","message":{"role":"user","content":"\\ud83d"}}'
    reply = assistant(TEXT, parent=None)
    m = mirror(TEXT)
    child = b'{"type":"label","id":"l1","parentId":"%s","label":"\\udc00"}' % m["id"].encode()
    lines = [*encode([header(), raw, reply, m]), child]
    verdicts = run(lines)
    assert [v.action for v in verdicts] == [Action.KEPT] * 3 + [Action.DROPPED, Action.KEPT]
    assert verdicts[1].output == raw
    assert json.loads(verdicts[4].output) == {
        "type": "label",
        "id": "l1",
        "parentId": reply["id"],
        "label": "\udc00",
    }


@pytest.mark.parametrize(
    "kind", [{"a": 1}, ["text"], 3, None], ids=["object", "list", "int", "null"]
)
def test_a_user_block_whose_type_is_not_a_string_is_kept(kind):
    # After a reply, a user message is read for a heartbeat prompt: its blocks' types are
    # looked up among the text types, which an object or a list cannot be.
    odd = user("hello again")
    odd["message"]["content"] = [{"type": kind, "text": "[OpenClaw heartbeat poll]"}]
    reply = assistant(TEXT)
    lines = encode([header(), user(), reply, odd, mirror(TEXT)])
    verdicts = run(lines)
    # every line kept: no heartbeat turn was opened, so the mirror repeats nothing of its turn
    assert outputs(verdicts) == lines


class _FailingMemory(Memory):
    """A store that fails once, on one key: an engine error in the middle of a rule."""

    def __init__(self, failing_key: str) -> None:
        self.values: dict[str, list] = {}
        self.failing_key = failing_key

    def get(self, key: str) -> list | None:
        if key == self.failing_key:
            self.failing_key = ""
            raise RuntimeError("the store went away")
        return self.values.get(key)

    def put(self, key: str, value: list) -> None:
        self.values[key] = value


def test_an_engine_error_dead_letters_the_record_and_the_run_goes_on():
    reply = assistant(TEXT)
    odd = user("hello again")
    lines = encode([header(), user(), reply, odd, mirror(TEXT)])
    session = Session("s1", SessionState(), _FailingMemory("e:" + odd["id"]))
    verdicts = process(Engine(), session, lines)
    letter = verdicts[3].dead_letter
    assert verdicts[3].action is Action.DEAD_LETTERED
    assert letter.raw == lines[3]
    assert letter.reason.startswith("engine error: RuntimeError in ")
    (alert,) = verdicts[3].alerts
    assert alert.kind == "malformed_entry"
    assert alert.evidence["reason"] == letter.reason
    assert [v.action for v in verdicts[:3]] == [Action.KEPT] * 3
    assert verdicts[4].drop_rule == "delivery_mirror_duplicate"


def test_a_lone_surrogate_in_a_model_name_is_kept_and_still_compared():
    odd = "claude\udc00"
    reply = assistant(TEXT, thinking="think", model=odd)
    cache = custom()
    echo = assistant(TEXT, parent=cache["id"], usage=None, model=odd)
    # as JSON escapes: the lines are ASCII, the names they decode to are not UTF-8
    escaped = [json.dumps(item).encode("ascii") for item in (reply, echo)]
    verdicts = run([header(), user(), escaped[0], cache, escaped[1]])
    assert not any(v.dead_letter for v in verdicts)
    assert drops(verdicts) == {echo["id"]: ("mistagged_echo", reply["id"])}


def test_a_file_path_with_bytes_that_are_not_utf8_is_a_source_like_any_other():
    path = b"sessions/caf\xe9.jsonl".decode("utf-8", "surrogateescape")
    verdicts = run([header(), user(), assistant(TEXT), mirror(TEXT)], path=path)
    assert [v.action for v in verdicts] == [Action.KEPT] * 3 + [Action.DROPPED]
