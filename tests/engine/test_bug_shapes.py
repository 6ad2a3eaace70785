"""The four duplication bugs seen in real OpenClaw sessions, end to end (issue: tests (a)-(d))."""

from __future__ import annotations

import json

import pytest

from stream.engine import Action, Severity
from tests.support.builders import (
    THINKING_REJECTED,
    alert_kinds,
    alerts,
    assert_valid_tree,
    assistant,
    counted_usage,
    custom,
    drops,
    header,
    kept,
    kept_ids,
    run,
    user,
    zero_usage,
)


def assistant_lines(verdicts):
    return [
        value
        for value in kept(verdicts)
        if value.get("type") == "message" and value["message"]["role"] == "assistant"
    ]


# (a) raw thinking reply + cleaned child ----------------------------------------------------------


def raw_and_cleaned(text, thinking="Reasoning about the request."):
    raw = assistant(text, thinking=thinking)
    cleaned = assistant(text, parent=raw["id"], usage=raw["message"]["usage"])
    return raw, cleaned


def test_a_two_turns_with_thinking_give_two_assistant_lines_not_four():
    raw1, child1 = raw_and_cleaned("The meeting moved to Thursday at 10.")
    raw2, child2 = raw_and_cleaned("I booked the room on the third floor.")
    items = [header(), user("when is it?"), raw1, child1, user("book a room"), raw2, child2]
    verdicts = run(items)
    assert [value["id"] for value in assistant_lines(verdicts)] == [raw1["id"], raw2["id"]]
    assert drops(verdicts) == {
        child1["id"]: ("cleaned_child_duplicate", raw1["id"]),
        child2["id"]: ("cleaned_child_duplicate", raw2["id"]),
    }
    # the next turn's user message named the dropped child: it now names the raw reply
    assert kept(verdicts)[3]["parentId"] == raw1["id"]
    assert_valid_tree(verdicts)


def test_a_distinct_messages_are_kept():
    raw = assistant("First part of the answer.", thinking="t")
    other = assistant("Second, different message.", parent=raw["id"], usage=None)
    assert not drops(run([header(), user(), raw, other]))


def test_a_same_text_across_turns_is_kept():
    raw1 = assistant("Yes.", thinking="t")
    raw2 = assistant("Yes.", thinking="t")
    verdicts = run([header(), user("is it on?"), raw1, user("still on?"), raw2])
    assert not drops(verdicts)
    assert len(assistant_lines(verdicts)) == 2


def test_a_same_text_without_lineage_is_kept():
    raw = assistant("Sure, done.", thinking="t")
    unrelated = assistant("Sure, done.", parent=None)  # its own model call: own usage
    verdicts = run([header(), user(), raw, unrelated])
    assert not drops(verdicts)
    assert "consecutive_assistant" in alert_kinds(verdicts)


def test_a_child_with_different_text_is_kept():
    raw = assistant("Draft: the answer is 42.", thinking="t")
    child = assistant("Final: the answer is 42.", parent=raw["id"], usage=None)
    verdicts = run([header(), user(), raw, child])
    assert not drops(verdicts)
    assert kept_ids(verdicts)[-2:] == [raw["id"], child["id"]]


# (b) cli copies after cache-ttl, the storm they cause, and the cascade that follows ---------


def test_b_thirty_cli_copies_storm_and_a_repetition_cascade():
    items = [header()]
    copies = []
    replies = []
    for n in range(30):
        text = f"Turn {n}: here is the status of the nightly build and the flaky test list."
        reply = assistant(text, thinking=f"Considering turn {n}.")
        copy = assistant(text, api="cli", provider="claude-cli", model="opus", usage=None)
        items += [user(f"status {n}?"), reply, custom("openclaw.cache-ttl"), copy]
        replies.append(reply)
        copies.append(copy)
    unit = replies[-1]["message"]["content"][1]["text"]
    cascade = assistant("\n\n".join([unit] * 4))
    items += [user("and now?"), cascade]
    verdicts = run(items)

    assert drops(verdicts) == {
        copy["id"]: ("cli_mirror_duplicate", reply["id"])
        for copy, reply in zip(copies, replies, strict=True)
    }
    assert len(kept(verdicts)) == len(items) - 30
    for copy in copies:
        (alert,) = [a for a in alerts(verdicts, "cli_mirror_duplicate") if a.entry_id == copy["id"]]
        assert alert.severity is Severity.WARNING
        assert alert.action is Action.DROPPED

    (storm,) = alerts(verdicts, "duplicate_storm")
    assert (storm.entry_id, storm.related_entry_id) == (None, copies[2]["id"])

    (repetition,) = alerts(verdicts, "repetition_cascade")
    assert repetition.entry_id == cascade["id"]
    assert repetition.evidence == {"copies": 4, "unit_length": len(unit)}
    # every user message named a dropped copy: it is re-parented to the cache-ttl entry
    assert_valid_tree(verdicts)
    users = [v for v in kept(verdicts) if v.get("message", {}).get("role") == "user"]
    assert all(u["parentId"] not in {c["id"] for c in copies} for u in users)


# (c) a mirrored turn re-emitted after its snapshot gained a reasoning record ---------------


def test_c_positional_keys_shifted_by_a_new_reasoning_record_lose_nothing():
    scope = "agent:main:telegram:direct:42"
    question = user("what did the CI say?", idempotency_key=f"{scope}:user:0")
    answer = assistant("CI is green on main.", idempotency_key=f"{scope}:assistant:1")
    # the snapshot now holds a reasoning record before the answer: indexes shift by one
    question_again = user("what did the CI say?", idempotency_key=f"{scope}:user:0")
    reasoning = assistant(
        "Let me look at the CI run first.",
        thinking="check the pipeline",
        idempotency_key=f"{scope}:assistant:1",
    )
    answer_again = assistant("CI is green on main.", idempotency_key=f"{scope}:assistant:2")
    verdicts = run([header(), question, answer, question_again, reasoning, answer_again])

    contents = [json.dumps(v["message"]["content"]) for v in kept(verdicts)[1:]]
    assert sorted(contents) == sorted(
        json.dumps(x["message"]["content"]) for x in (question, answer, reasoning)
    )
    assert drops(verdicts) == {
        question_again["id"]: ("idempotent_replay", question["id"]),
        answer_again["id"]: ("idempotent_replay", answer["id"]),
    }
    (collision,) = alerts(verdicts, "idempotency_key_collision")
    assert (collision.entry_id, collision.related_entry_id) == (reasoning["id"], answer["id"])
    assert alert_kinds(verdicts).count("positional_idempotency_key") == 1


def test_c_two_turns_with_identical_role_and_content_but_different_keys_are_kept():
    items = [header()]
    for run_id in ("run-1", "run-2"):
        items += [
            user("ok", idempotency_key=f"agent:main:{run_id}:user:0"),
            assistant("Noted.", idempotency_key=f"agent:main:{run_id}:assistant:1"),
        ]
    verdicts = run(items)
    assert not drops(verdicts)
    assert len(kept(verdicts)) == 5
    items = [header(), user("ok", idempotency_key="uuid-1"), user("ok", idempotency_key="uuid-2")]
    assert not drops(run(items))


# (d) a subagent echo tagged with the real provider, and the thinking-rejection loop --------------


def test_d_mistagged_subagent_echo_and_thinking_rejection_loop():
    text = "Subagent finished: 3 files changed, tests pass."
    reply = assistant(text, thinking="Summarize the subagent result.", provider="anthropic")
    ttl = custom("openclaw.cache-ttl")
    echo = assistant(text, provider="anthropic", parent=ttl["id"], usage=reply["message"]["usage"])
    failures = [assistant(content=[], error=THINKING_REJECTED) for _ in range(3)]
    items = [header(), user("run the subagent"), reply, ttl, echo]
    for failure in failures:
        items += [user("continue"), failure]
    verdicts = run(items)

    assert drops(verdicts) == {echo["id"]: ("mistagged_echo", reply["id"])}
    (echo_alert,) = alerts(verdicts, "mistagged_echo")
    assert echo_alert.evidence["provider"] == "anthropic"
    assert echo_alert.severity is Severity.WARNING
    (loop,) = alerts(verdicts, "thinking_rejection_loop")
    assert loop.severity is Severity.CRITICAL
    assert loop.entry_id == failures[1]["id"]
    assert loop.evidence["count"] == 2
    assert all(failure["id"] in kept_ids(verdicts) for failure in failures)


def test_d_an_echo_beside_the_reply_it_copies_is_dropped():
    """The seed's echo hanging beside its reply: a second child of the turn's user message,
    with the reply's provider, model and counted usage copied verbatim."""
    text = "Subagent finished: 3 files changed, tests pass."
    ask = user("run the subagent")
    reply = assistant(text, thinking="Summarize the subagent result.", parent=ask["id"])
    echo = assistant(text, parent=ask["id"], usage=reply["message"]["usage"])
    verdicts = run([header(), ask, reply, echo])
    assert drops(verdicts) == {echo["id"]: ("mistagged_echo", reply["id"])}


@pytest.mark.parametrize("usage", ["zero", "its own"])
def test_d_a_reply_beside_the_first_billed_otherwise_answers_the_user_and_is_kept(usage):
    """A second delivery's reply with the first reply's words: billed on its own, or at zero
    (#126680's note), it answers the user message it hangs below."""
    text = "Subagent finished: 3 files changed, tests pass."
    ask = user("run the subagent")
    reply = assistant(text, thinking="Summarize the subagent result.", parent=ask["id"])
    second = assistant(text, parent=ask["id"],
                       usage=zero_usage() if usage == "zero" else counted_usage())
    assert not drops(run([header(), ask, reply, second]))
