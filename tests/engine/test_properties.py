"""Properties over generated sessions: robustness, determinism, idempotence, accounting."""

from __future__ import annotations

import json
from collections import defaultdict

from hypothesis import given
from hypothesis import strategies as st

from stream.engine import (
    Action,
    DictMemory,
    Engine,
    FileOrigin,
    Limits,
    Session,
    SessionState,
)
from stream.engine.tally import Tally
from stream.worker import codec
from tests.support.builders import (
    assistant,
    custom,
    encode,
    entry,
    header,
    is_mirror,
    mirror,
    new_session,
    normalized_text,
    outputs,
    process,
    tool_result,
    user,
    zero_usage,
)
from tests.support.examples import SETTINGS

TEXTS = [
    "",
    "  ",
    "Hello there, friend.",
    "[[reply_to_current]] Hello there,   friend.",
    "Done with the task now.",
    "Done with the task now.\n\nDone with the task now.",
    "Something else.",
    "NO_REPLY",
]
KEYS = [
    None, None, None, "k1", "k2", "run-1:user:0", "run-1:assistant:1", "run-2:assistant:1",
    "announce:settle:run-b", "announce:settle:run-b:retry-1", "cli-assistant:run-1",
]
PROVIDERS = [("anthropic", "claude-opus-4-5"), ("openai", "gpt-5"), ("openclaw", "delivery-mirror")]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


KINDS = [
    "user", "assistant", "assistant", "echo", "echo", "mirror", "mirror", "tool", "custom",
    "again", "leaf", "compaction", "rewrite", "rewrite", "silent", "cli-turn", "import", "retry",
]
JUNK = [b"{", b"[]", b'{"type":"message"}', b"\xff"]


def _draw_parent(draw, ids):
    choice = draw(st.sampled_from(["prev", "prev", "none", "ghost", "earlier"]))
    if choice == "prev":
        return ids[-1] if ids else None
    if choice == "earlier" and ids:
        return draw(st.sampled_from(ids))
    return "ghost-parent" if choice == "ghost" else None


def _draw_mirror(draw, text, parent, ids):
    """A mirror with what it may say it delivered: a key, its own send, a source reply, media."""
    marker: dict = {}
    if draw(st.booleans()):
        marker["sourceMessageId"] = draw(st.sampled_from(["m1", "m2"]))
    if ids and draw(st.booleans()):
        marker["sourceAssistantMessageId"] = draw(st.sampled_from(ids))
    fields: dict = {}
    if draw(st.integers(0, 4)) == 0:
        fields["openclawDelivery"] = {"mediaUrls": ["/tmp/chart.png"]}
    return mirror(
        text,
        parent=parent,
        idempotency_key=draw(st.sampled_from([None, None, "send-1", "send-2"])),
        marker=marker or None,
        **fields,
    )


def _draw_echo(draw, original, text, parent):
    """A copy of the latest reply's text, in one of the shapes the echo rules look for."""
    text = normalized_text(original) if draw(st.booleans()) else text
    form = draw(st.sampled_from(["mirror", "cli", "child", "echo"]))
    if form == "mirror":
        return mirror(text, parent=parent)
    return assistant(
        text,
        provider=original.get("provider", "anthropic"),
        model=original.get("model", "claude-opus-4-5"),
        api="cli" if form == "cli" else "anthropic-messages",
        usage=draw(st.sampled_from([None, original.get("usage")])),
        parent=parent,
    )


def _stamp(draw, item: dict) -> dict:
    """OpenClaw stamps each message with its time; a few share one, as copies do."""
    if "message" in item and draw(st.booleans()):
        item["message"]["timestamp"] = 1_796_100_000_000 + draw(st.integers(0, 3))
    return item


def _draw_reply(draw, replies, calls, *, text, parent, key):
    provider, model = draw(st.sampled_from(PROVIDERS))
    usage = {
        "counted": {"input": 7, "output": len(calls) + len(replies)},
        "absent": None,
        "zero": zero_usage(),
        "copied": replies[-1]["message"].get("usage") if replies else None,
    }[draw(st.sampled_from(["counted", "absent", "zero", "copied"]))]
    new_calls = [f"call{len(replies)}"] if draw(st.booleans()) else []
    calls += new_calls
    # a reply that declares it is mirrored, now and then
    fields = {
        "__openclaw": draw(st.sampled_from([
            {"mirrorIdentity": "run-1:assistant"}, {"importedFrom": "claude-cli"},
        ]))
    } if draw(st.booleans()) else {}
    return assistant(
        text,
        **fields,
        thinking="thought" if draw(st.booleans()) else None,
        tool_calls=new_calls,
        provider=provider,
        model=model,
        api="cli" if draw(st.booleans()) else "anthropic-messages",
        usage=usage,
        parent=parent,
        idempotency_key=key,
        error=draw(st.sampled_from([None, None, "boom", "thinking blocks cannot be modified"])),
    )


def _text_of(item: dict) -> str:
    content = item.get("message", {}).get("content")
    return " ".join(b.get("text", "") for b in content if isinstance(b, dict)) \
        if isinstance(content, list) else str(content or "")


def _draw_compound(draw, kind, items, *, parent, text, key) -> list[dict]:
    """Shapes of several entries that the reported defects write (or their near misses)."""
    replies = [i for i in items if i.get("message", {}).get("role") == "assistant"]
    users = [i for i in items if i.get("message", {}).get("role") == "user"]
    latest = _text_of(replies[-1]) if replies else text
    if kind == "rewrite" and items:
        # a transcript rewrite: a suffix of the entries again under new ids, the first beside
        # its original (as it was, or replaced), the others chained below it
        suffix = items[-draw(st.integers(1, min(4, len(items)))):]
        copies = []
        for n, original in enumerate(suffix):
            copy = json.loads(json.dumps(original))
            copy["id"] = f"{original['id']}-copy{len(items)}"
            copy["parentId"] = original.get("parentId") if n == 0 else copies[-1]["id"]
            if n == 0 and "message" in copy and draw(st.booleans()):
                copy["message"]["content"] = "replaced"
            copies.append(copy)
        return copies
    if kind == "silent":
        heartbeat = user(text, parent=parent, provenance={"sourceTool": "heartbeat"})
        return [heartbeat, assistant(draw(st.sampled_from(["NO_REPLY", "HEARTBEAT_OK", text]))),
                mirror(draw(st.sampled_from([latest, text])), kind="channel-final")]
    if kind == "cli-turn":
        first, second = draw(st.sampled_from(TEXTS)), draw(st.sampled_from(TEXTS))
        joined = draw(st.sampled_from([f"{first}\n\n{second}", f"{second}\n\n{first}", first]))
        return [assistant(first, tool_calls=["cli-call"], parent=parent), tool_result("cli-call"),
                assistant(second), assistant(joined, api="cli", idempotency_key=key)]
    if kind == "import":
        return [assistant(draw(st.sampled_from([latest, text])), parent=parent,
                          __openclaw={"importedFrom": "claude-cli"})]
    # a prompt retried after an empty failure
    prompt = _text_of(users[-1]) if users and draw(st.booleans()) else text
    return [assistant(content=[], usage=zero_usage(), stop_reason="aborted", error="idle",
                      parent=parent), user(prompt, idempotency_key=key)]


COMPOUNDS = ("rewrite", "silent", "cli-turn", "import", "retry")


@st.composite
def session_lines(draw, min_size=0, max_size=25, reuse_ids=True):
    """A plausible session: messages, mirrors, copies, redeliveries and the odd broken line."""
    items: list[dict] = []
    lines: list[bytes] = []
    calls: list[str] = []
    if draw(st.booleans()):
        lines.append(encode([header()])[0])
    for _ in range(draw(st.integers(min_size, max_size))):
        if draw(st.integers(0, 19)) == 0:
            lines.append(draw(st.sampled_from(JUNK)))
            continue
        kind = draw(st.sampled_from(KINDS))
        if kind == "again" and lines:
            lines.append(draw(st.sampled_from(lines)))
            continue
        ids = [item["id"] for item in items]
        parent = _draw_parent(draw, ids)
        text = draw(st.sampled_from(TEXTS))
        key = draw(st.sampled_from(KEYS))
        replies = [i for i in items if i.get("message", {}).get("role") == "assistant"]
        if kind in COMPOUNDS:
            made = _draw_compound(draw, kind, items, parent=parent, text=text, key=key)
            if kind != "rewrite":
                for item in made:
                    _stamp(draw, item)
            items += made
            lines += encode(made)
            continue
        if kind == "echo" and replies:
            item = _draw_echo(draw, replies[-1]["message"], text, parent)
        elif kind == "assistant":
            item = _draw_reply(draw, replies, calls, text=text, parent=parent, key=key)
        elif kind == "mirror":
            item = _draw_mirror(draw, text, parent, ids)
        elif kind == "leaf" and ids:
            item = entry("leaf", parent=parent, targetId=draw(st.sampled_from(ids)))
        elif kind == "compaction":
            item = entry("compaction", parent=parent, summary=text or "summary",
                         firstKeptEntryId=draw(st.sampled_from([*ids, None])), tokensBefore=9)
        elif kind == "tool":
            item = tool_result(draw(st.sampled_from([*calls, "unknown-call"])), parent=parent)
        elif kind == "custom":
            custom_type = draw(st.sampled_from(["openclaw.cache-ttl", "model-snapshot"]))
            item = custom(custom_type, parent=parent)
        else:
            item = user(text, parent=parent, idempotency_key=key)
        if reuse_ids and ids and draw(st.integers(0, 9)) == 0:
            item["id"] = draw(st.sampled_from(ids))  # an id reused with other content
        if draw(st.integers(0, 5)) == 0:
            item["appendMode"] = "side"
        _stamp(draw, item)
        items.append(item)
        lines.append(encode([item])[0])
    return lines


def clean(lines, session_id="s1", limits=None, path="s1.jsonl"):
    return process(Engine(limits), new_session(session_id, limits), lines, path)


def fingerprint(verdicts):
    return [
        (
            v.action,
            v.output,
            v.drop_rule,
            [a.as_json() for a in v.alerts],
            v.dead_letter and v.dead_letter.as_json(),
        )
        for v in verdicts
    ]


# --- robustness ---------------------------------------------------------------------------------


@SETTINGS
@given(st.lists(st.binary(max_size=64), max_size=12))
def test_never_raises_on_arbitrary_bytes(lines):
    verdicts = clean(lines)
    for raw, verdict in zip(lines, verdicts, strict=True):
        assert verdict.action in Action
        if verdict.action is Action.DEAD_LETTERED:
            assert verdict.dead_letter.raw == raw
            assert [a.kind for a in verdict.alerts] == ["malformed_entry"]


@SETTINGS
@given(st.lists(json_values, max_size=10))
def test_never_raises_on_arbitrary_json_values(values):
    lines = [json.dumps(value).encode() for value in values]
    verdicts = clean(lines)
    assert len(verdicts) == len(lines)
    for value, verdict in zip(values, verdicts, strict=True):
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            assert verdict.action is Action.DEAD_LETTERED


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["message", "custom", "compaction", "session"]),
            json_values,
            json_values,
            json_values,
        ),
        max_size=10,
    )
)
def test_well_formed_entries_of_any_shape_are_never_dead_lettered(shapes):
    """Unknown shapes pass: only lines that are not entries at all go to the dead letters."""
    lines = []
    for n, (kind, body, parent, extra) in enumerate(shapes):
        value = {"type": kind, "id": f"e{n % 4}", "parentId": parent, "message": body, "x": extra}
        lines.append(json.dumps(value).encode())
    for verdict in clean(lines):
        assert verdict.action is not Action.DEAD_LETTERED, verdict.dead_letter



# Every field of a message and of its content blocks that some rule reads.
MESSAGE_FIELDS = [
    "role", "content", "timestamp", "provider", "model", "api", "errorMessage", "stopReason",
    "idempotencyKey", "__openclaw", "toolCallId", "openclawDeliveryMirror",
    "openclawDisplayContent", "openclawDelivery", "phase", "responseId", "usage", "provenance",
]
BLOCK_FIELDS = ["type", "text", "textSignature", "id"]
# strings with lone surrogates too: valid JSON (as escapes), not UTF-8
odd_values = json_values | st.text(
    st.characters(min_codepoint=0xD7F0, max_codepoint=0xE00F), max_size=6
)


def _with_odd_field(raw: bytes, data) -> bytes:
    """The line with one read field of its message, or of a content block, set to any JSON
    value (sometimes: most lines stay as they were)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    message = value.get("message") if isinstance(value, dict) else None
    if not isinstance(message, dict) or not data.draw(st.booleans()):
        return raw
    target, fields = message, MESSAGE_FIELDS
    blocks = message.get("content")
    if isinstance(blocks, list) and blocks and data.draw(st.booleans()):
        block = data.draw(st.sampled_from(blocks))
        if isinstance(block, dict):
            target, fields = block, BLOCK_FIELDS
    target[data.draw(st.sampled_from(fields))] = data.draw(odd_values)
    return json.dumps(value).encode("ascii")


@SETTINGS
@given(session_lines(reuse_ids=False), st.data())
def test_a_read_field_of_any_json_type_is_kept_not_an_engine_error(lines, data):
    """A well-formed session whose messages have one field a rule reads (of the message or of
    a content block) set to any JSON value: an odd shape, so every entry is kept or dropped as
    an entry, never dead-lettered as an engine error, wherever in the session it comes."""
    odd = [_with_odd_field(raw, data) for raw in lines]
    for raw, verdict in zip(odd, clean(odd), strict=True):
        if verdict.dead_letter is not None:
            assert not verdict.dead_letter.reason.startswith("engine error"), verdict.dead_letter
            assert raw in JUNK


# --- determinism and idempotence ----------------------------------------------------------------


@SETTINGS
@given(session_lines())
def test_same_input_twice_gives_identical_output_and_alert_ids(lines):
    assert fingerprint(clean(lines)) == fingerprint(clean(lines))


@SETTINGS
@given(session_lines(reuse_ids=False))
def test_cleaning_a_cleaned_session_drops_nothing_more(lines):
    """Without ids reused for other content: see rules/test_identity.py for the two known gaps then.
    The one shape docs/rules.md names may be dropped the second time, and by its rule only."""
    first = clean(lines)
    once = outputs(first)
    twice = clean(once)
    dropped = {
        json.loads(raw)["id"]: verdict.drop_rule
        for raw, verdict in zip(once, twice, strict=True)
        if verdict.action is not Action.KEPT
    }
    assert set(dropped.values()) <= {"delivery_mirror_duplicate"}
    assert set(dropped) <= _second_sends_below_a_dropped_first(lines, first)
    if not dropped:
        assert outputs(twice) == once


def _second_sends_below_a_dropped_first(lines, verdicts) -> set[str]:
    """Kept mirrors that name only their own send and hang below a mirror dropped as the
    reply's delivery: another send (#23's near miss), which as cleaned hangs below the reply,
    where a second cleaning takes it for the first (docs/rules.md, `delivery_mirror_duplicate`)."""
    parsed = [_object(raw) for raw in lines]
    first_sends = {
        value["id"]
        for value, verdict in zip(parsed, verdicts, strict=True)
        if verdict.drop_rule == "delivery_mirror_duplicate"
    }
    found = set()
    for value, verdict in zip(parsed, verdicts, strict=True):
        marker = _object(_object(value.get("message")).get("openclawDeliveryMirror"))
        if (
            verdict.action is Action.KEPT
            and value.get("parentId") in first_sends
            and (marker.get("sourceMessageId") or marker.get("sourceTurnId"))
            and not marker.get("sourceAssistantMessageId")
        ):
            found.add(value["id"])
    return found


def _object(value: object) -> dict:
    """A JSON object as a dict, from its line or as a field's value; {} for anything else."""
    if isinstance(value, bytes):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


@SETTINGS
@given(session_lines(), st.data())
def test_reprocessing_a_prefix_after_a_restart_gives_the_same_output(lines, data):
    engine, session = Engine(), new_session()
    straight = clean(lines)
    cut = data.draw(st.integers(0, len(lines)))
    back = data.draw(st.integers(0, cut))
    process(engine, session, lines[:cut])
    resumed = process(engine, session, lines[back:], first=back + 1)
    assert [v.output for v in resumed] == [v.output for v in straight[back:]]
    assert [v.action for v in resumed] == [v.action for v in straight[back:]]
    first_ids = {a.id for v in straight for a in v.alerts}
    assert {a.id for v in resumed for a in v.alerts} <= first_ids


@SETTINGS
@given(session_lines(), st.data())
def test_state_survives_serialization_between_any_two_entries(lines, data):
    cut = data.draw(st.integers(0, len(lines)))
    engine = Engine()
    memory = DictMemory(engine.limits.max_ids)
    session = Session("s1", SessionState(), memory)
    first = process(engine, session, lines[:cut])
    # as the worker's tables hold it
    stored = codec.unpack(codec.pack(session.state.to_list()))
    restored = Session("s1", SessionState.from_list(stored), memory)
    rest = process(engine, restored, lines[cut:], first=cut + 1)
    assert fingerprint(first + rest) == fingerprint(clean(lines))


# --- accounting ---------------------------------------------------------------------------------


@SETTINGS
@given(session_lines(), st.sampled_from([None, 3, 10_000]))
def test_accounting_every_entry_is_kept_dropped_or_dead_lettered_and_named(lines, max_ids):
    limits = Limits(max_ids=max_ids) if max_ids else None
    verdicts = clean(lines, limits=limits)
    tally = Tally()
    for number, verdict in enumerate(verdicts, 1):
        tally.add(verdict)
        if verdict.action is Action.KEPT:
            assert verdict.output is not None and verdict.dead_letter is None
            continue
        assert verdict.output is None
        (named,) = [a for a in verdict.alerts if a.action is verdict.action]
        assert named.source == FileOrigin("s1.jsonl", number)
        if verdict.action is Action.DROPPED:
            assert named.kind == verdict.drop_rule
        else:
            assert named.kind == "malformed_entry"
            assert verdict.dead_letter.raw == lines[number - 1]
    assert tally.balanced()
    assert tally.entries_in == len(lines)
    assert tally.kept + tally.dropped + tally.dead_lettered == len(lines)


# --- independence of sessions -------------------------------------------------------------------


@SETTINGS
@given(st.lists(session_lines(max_size=10), min_size=2, max_size=4), st.randoms())
def test_interleaved_sessions_give_the_same_per_session_results(sessions, rnd):
    alone = {
        f"s{n}": fingerprint(clean(lines, f"s{n}", path=f"s{n}.jsonl"))
        for n, lines in enumerate(sessions)
    }
    order = [n for n, lines in enumerate(sessions) for _ in lines]
    rnd.shuffle(order)
    engine = Engine()
    states = {n: new_session(f"s{n}") for n in range(len(sessions))}
    cursor = defaultdict(int)
    mixed = defaultdict(list)
    for n in order:
        position = cursor[n]
        cursor[n] += 1
        raw = sessions[n][position]
        verdict = engine.process(states[n], raw, FileOrigin(f"s{n}.jsonl", position + 1))
        mixed[f"s{n}"].append(verdict)
    for name, expected in alone.items():
        assert fingerprint(mixed[name]) == expected


# --- the echo rules only ever drop a repeat of the turn's kept reply text ------------------------


# Drops decided by identity (an id, a key, a copy's place and payload), not by text.
IDENTITY_DROPS = (
    "redelivery", "idempotent_replay", "announce_retry_duplicate", "rewrite_copy", "persisted_copy",
    "same_response", "same_tool_calls", "same_tool_result", "same_inbound",
)


@SETTINGS
@given(session_lines(max_size=30))
def test_echo_drops_repeat_an_earlier_kept_assistant_text_of_the_same_turn(lines):
    """A dropped text repeats a kept reply of its turn; a mirror one since a person last wrote,
    or any one once a reply answered that person; a heartbeat's replay one of the session's; a
    cli record all the turn's model replies joined."""
    verdicts = clean(lines)
    turn_texts: set[str] = set()
    turn_replies: list[str] = []
    since_person: set[str] = set()
    answered = False
    session_texts: set[str] = set()
    for raw, verdict in zip(lines, verdicts, strict=True):
        if verdict.action is Action.DEAD_LETTERED:
            continue
        value = json.loads(raw)
        message = value.get("message") if value.get("type") == "message" else None
        if verdict.action is Action.DROPPED:
            if verdict.drop_rule not in IDENTITY_DROPS:
                text = normalized_text(message)
                assert text
                if verdict.drop_rule == "silent_turn_replay":
                    assert text in session_texts
                elif verdict.drop_rule == "cli_aggregate_duplicate":
                    assert text == " ".join(turn_replies)
                elif verdict.drop_rule == "delivery_mirror_duplicate":
                    assert text in (session_texts if answered else turn_texts | since_person)
                else:
                    assert text in turn_texts
            continue
        if not isinstance(message, dict):
            continue
        if message.get("role") == "user":
            turn_texts = set()
            turn_replies = []
            provenance = message.get("provenance")
            if not isinstance(provenance, dict) or provenance.get("kind") == "external_user":
                since_person = set()
                answered = False
        elif message.get("role") == "assistant":
            text = normalized_text(message)
            if text:
                turn_texts.add(text)
                session_texts.add(text)
                since_person.add(text)
                answered = answered or not is_mirror(message)
                if message.get("api") != "cli" and not is_mirror(message):
                    turn_replies.append(text)


# --- state stays small --------------------------------------------------------------------------


def test_state_and_memory_stay_bounded_over_a_long_session():
    limits = Limits(max_ids=50)
    session = new_session("long", limits)
    engine = Engine(limits)
    items = [header("long")]
    for n in range(600):
        items += [
            user(f"question {n}", idempotency_key=f"run-{n}:user:0"),
            assistant(f"answer {n}", thinking="t", tool_calls=[f"c{n}"]),
            tool_result(f"c{n}"),
            mirror(f"answer {n}"),
        ]
    verdicts = process(engine, session, encode(items), "long.jsonl")
    assert sum(v.action is Action.DROPPED for v in verdicts) == 600
    assert len(session.memory) <= 2 * (4 * limits.max_ids + 64)
    assert len(codec.pack(session.state.to_list())) < 1024
