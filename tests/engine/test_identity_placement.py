"""A copy that carries its message's identity is dropped wherever it lands: drawn over the real
corpus, a message written again anywhere later in its session (stamped anew or not) is dropped
as a copy of the message, and nothing else in the session changes; the same message under
another identity is a message of its own and kept.

The corpus (OpenClaw 2026.2-2026.4) carries tool call ids; the identities later releases write
(`responseId`, `__openclaw.transport`) are added to every row of a session the way those
releases write them, each row its own."""

from __future__ import annotations

import copy

import orjson
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from stream.engine import Action, Verdict
from tests.support.builders import run
from tests.support.data import DATA
from tests.support.workload import corpus_sessions

# what each kind of identity drops a copy as
RULE_OF = {"tool calls": "same_tool_calls", "tool result": "same_tool_result",
           "response id": "same_response", "inbound": "same_inbound"}
SESSIONS = corpus_sessions()


def _with_later_identities(lines: list[bytes]) -> list[dict]:
    """The session as a 2026.8+ release writes it: each reply with its provider's response id,
    each person's message with the channel's id."""
    items = [orjson.loads(raw) for raw in lines]
    for n, item in enumerate(items):
        message = item.get("message")
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant" and message.get("provider") != "openclaw":
            message["responseId"] = f"resp_{n:06d}a9c0f3"
        elif message.get("role") == "user":
            message["__openclaw"] = {"transport": {
                "channel": "telegram", "conversationRef": "chat:8812", "messageId": str(5000 + n)}}
    return items


def _carries_identity(item: dict, kind: str) -> bool:
    message = item.get("message")
    if not isinstance(message, dict):
        return False
    role = message.get("role")
    if kind == "tool calls":
        content = message.get("content")
        return role == "assistant" and isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "toolCall" for b in content)
    if kind == "tool result":
        return role == "toolResult" and bool(message.get("toolCallId"))
    if kind == "response id":
        return "responseId" in message
    return role == "user" and "__openclaw" in message


def _outcome(verdict: Verdict) -> tuple:
    return verdict.action, verdict.drop_rule, verdict.output


@st.composite
def copies(draw, kinds=("tool calls", "tool result", "response id", "inbound")):
    """(the kind of identity, the session's items, where the copy goes, the original's index,
    the copy)."""
    kind = draw(st.sampled_from(kinds))
    lines = SESSIONS[draw(st.integers(0, len(SESSIONS) - 1))]
    later = kind in ("response id", "inbound")
    items = _with_later_identities(lines) if later else [orjson.loads(raw) for raw in lines]
    candidates = [n for n, item in enumerate(items) if _carries_identity(item, kind)
                  and n + 2 <= len(items)]
    if not candidates:
        return None
    original = draw(st.sampled_from(candidates))
    # not the line below it: the copy is known by what it carries, not where it hangs
    at = draw(st.integers(original + 2, len(items)))
    above = items[at - 1]
    again = copy.deepcopy(items[original])
    again["id"] = f"c0py{original:04x}"
    again["parentId"] = above.get("id")
    if isinstance(above.get("timestamp"), str):
        again["timestamp"] = above["timestamp"]
    return kind, items, at, original, again


def _insert(items: list[dict], at: int, item: dict) -> list[dict]:
    return [*items[:at], item, *items[at:]]


def _unchanged_but(at: int, before: list[Verdict], after: list[Verdict]) -> None:
    """Every other line comes out as it did without the inserted one."""
    assert [_outcome(v) for v in after[:at] + after[at + 1:]] == [_outcome(v) for v in before]


def _repeats(before: list[Verdict], original: int, items: list[dict]) -> set[str]:
    """The original's id, or the kept entry it stands for when it was itself a copy."""
    found = {items[original]["id"]}
    for alert in before[original].alerts:
        if alert.action.value == "dropped" and alert.related_entry_id:
            found.add(alert.related_entry_id)
    return found


def _drop_of(verdict: Verdict) -> tuple[str, str | None]:
    (alert,) = [a for a in verdict.alerts if a.action.value == "dropped"]
    return alert.kind, alert.related_entry_id


PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(copies(), st.booleans())
def test_a_copy_carrying_its_identity_is_dropped_wherever_it_lands(drawn, restamped):
    assume(drawn is not None)
    kind, items, at, original, again = drawn
    event(f"{len(items)} lines, copy {at - original} lines after")
    message = again["message"]
    if restamped and isinstance(message.get("timestamp"), int):
        message["timestamp"] += 93_000  # written again a minute and a half later
    before = run(items)
    after = run(_insert(items, at, again))
    assert after[at].action is Action.DROPPED, (items[original], at)
    rule, repeats = _drop_of(after[at])
    assert rule == RULE_OF[kind]
    assert repeats in _repeats(before, original, items)
    _unchanged_but(at, before, after)


@PROPERTY
@given(copies(kinds=("tool calls", "response id", "inbound")))
def test_the_same_message_under_another_identity_is_kept(drawn):
    """A second model call making the same calls, or a person sending the same words again:
    another call id, response id or channel id; a minute later."""
    assume(drawn is not None)
    _, items, at, _, again = drawn
    message = again["message"]
    if isinstance(message.get("timestamp"), int):
        message["timestamp"] += 61_000
    if "responseId" in message:
        message["responseId"] += "b"
    if "__openclaw" in message:
        message["__openclaw"]["transport"]["messageId"] += "9"
    for block in message.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "toolCall":
            block["id"] = block["id"] + "x2"
    after = run(_insert(items, at, again))
    assert after[at].drop_rule not in RULE_OF.values()


def test_the_draw_finds_every_kind_in_the_corpus():
    """The properties above are not vacuous: each kind of identity occurs in the corpus."""
    for kind in ("tool calls", "tool result", "response id", "inbound"):
        assert any(_carries_identity(item, kind) for lines in SESSIONS
                   for item in _with_later_identities(lines)), kind


pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")


# --- a completion announced again ------------------------------------------------------------

ANNOUNCES = [case["text"] for case in orjson.loads(
    (DATA / "openclaw-templates" / "text-identities.json").read_bytes())
    if case["family"] in ("announce_event", "announce_system_message", "announce_stats")]


def _user_row(text: str, row_id: str, above: dict, stamp: int) -> dict:
    row = {"type": "message", "id": row_id, "parentId": above.get("id"),
           "message": {"role": "user", "content": [{"type": "text", "text": text}],
                       "timestamp": stamp}}
    if isinstance(above.get("timestamp"), str):
        row["timestamp"] = above["timestamp"]
    return row


@st.composite
def announced_twice(draw):
    """(a real session with an announce of any release inserted anywhere, where its second
    delivery goes below it, the announce's text)."""
    text = draw(st.sampled_from(ANNOUNCES))
    items = [orjson.loads(raw) for raw in SESSIONS[draw(st.integers(0, len(SESSIONS) - 1))]]
    first = draw(st.integers(1, len(items)))
    items = _insert(items, first, _user_row(text, "4nn0unce", items[first - 1],
                                            1_774_000_000_000))
    at = draw(st.integers(first + 1, len(items)))
    return items, at, text


@PROPERTY
@given(announced_twice())
def test_a_completion_announced_again_is_dropped_wherever_it_lands(drawn):
    items, at, text = drawn
    again = _user_row(text, "4nn0unc2", items[at - 1], 1_774_000_093_000)
    before = run(items)
    after = run(_insert(items, at, again))
    assert after[at].action is Action.DROPPED
    assert _drop_of(after[at]) == ("same_announce", "4nn0unce")
    _unchanged_but(at, before, after)


@PROPERTY
@given(announced_twice(), st.booleans())
def test_a_completion_announced_again_beside_a_person_s_words_is_kept(drawn, words_first):
    """The near miss: the same announce with a person's paragraph before or after it."""
    items, at, text = drawn
    words = "thanks! could you also check the docs?"
    with_words = f"{words}\n\n{text}" if words_first else f"{text}\n\n{words}"
    after = run(_insert(items, at, _user_row(with_words, "w0rds", items[at - 1],
                                             1_774_000_093_000)))
    assert after[at].action is not Action.DROPPED
