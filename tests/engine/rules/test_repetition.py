"""A repetition inside a turn (rules/repetition): the `cli_…` rules, `cleaned_child_duplicate` and
`mistagged_echo`, on the shapes reported and their near misses."""

from __future__ import annotations

import json

import pytest

from stream.engine import (
    Action,
    Severity,
)
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
    mirror,
    outputs,
    run,
    tool_result,
    user,
    zero_usage,
)
from tests.support.rule_tests import AGENDA, TEXT, check_drop, cli_copy


def _cli_record(text: str, run_id: str = "run-1", **fields):
    return assistant(text, provider="claude-cli", model="claude-opus-5", api="cli",
                     idempotency_key=f"cli-assistant:{run_id}", **fields)


def _streamed_turn():
    first = assistant("Let me read the config file first.", tool_calls=["toolu_01"],
                      provider="claude-cli", model="claude-opus-5")
    result = tool_result("toolu_01", "port: 8080")
    second = assistant("It sets the port to 8080.", provider="claude-cli",
                       model="claude-opus-5")
    return first, result, second


def _imported(text: str, **fields):
    return assistant(
        text, provider="claude-cli", model="claude-sonnet-5", stop_reason="end_turn",
        __openclaw={"importedFrom": "claude-cli", "cliSessionId": "cli-1",
                    "externalId": "0c6f7d52"},
        **fields,
    )


def assistant_lines(verdicts):
    return [
        value
        for value in kept(verdicts)
        if value.get("type") == "message" and value["message"]["role"] == "assistant"
    ]


def raw_and_cleaned(text, thinking="Reasoning about the request."):
    raw = assistant(text, thinking=thinking)
    cleaned = assistant(text, parent=raw["id"], usage=raw["message"]["usage"])
    return raw, cleaned


# --- `cli_mirror_duplicate` -----------------------------------------------------------------------

def test_cli_mirror_duplicate_skips_non_message_entries():
    a = assistant(TEXT, thinking="thinking hard")
    c = cli_copy(TEXT)
    verdicts = run([header(), user(), a, custom("openclaw.cache-ttl"), c])
    check_drop(
        verdicts[4],
        kind="cli_mirror_duplicate",
        severity=Severity.WARNING,
        entry_id=c["id"],
        related=a["id"],
        line=5,
    )


def test_cli_copy_after_a_dropped_mirror_compares_with_the_kept_reply():
    a = assistant(TEXT)
    m, c = mirror(TEXT), cli_copy(TEXT)
    verdicts = run([header(), user(), a, m, c])
    assert drops(verdicts) == {
        m["id"]: ("delivery_mirror_duplicate", a["id"]),
        c["id"]: ("cli_mirror_duplicate", a["id"]),
    }


@pytest.mark.parametrize(
    "between",
    [
        lambda: [user("and now?")],
        lambda: [tool_result("c1")],
    ],
    ids=["user", "toolResult"],
)
def test_cli_copy_whose_previous_message_is_not_an_assistant_is_kept(between):
    a = assistant(TEXT, tool_calls=["c1"])
    verdicts = run([header(), user(), a, *between(), cli_copy(TEXT)])
    assert not drops(verdicts)


def test_cli_reply_with_new_text_is_kept():
    verdicts = run([header(), user(), assistant(TEXT), cli_copy("Another reply, other words.")])
    assert not drops(verdicts)


# --- `cleaned_child_duplicate` --------------------------------------------------------------------

def test_cleaned_child_duplicate_drops_the_text_only_child():
    a = assistant(TEXT, thinking="the raw reply carries its reasoning")
    child = assistant(TEXT, parent=a["id"], usage=None)
    verdicts = run([header(), user(), a, child])
    check_drop(
        verdicts[3],
        kind="cleaned_child_duplicate",
        severity=Severity.INFO,
        entry_id=child["id"],
        related=a["id"],
        line=4,
    )


def test_cleaned_child_with_string_content_and_the_parents_usage_is_dropped():
    a = assistant(TEXT, thinking="reasoning")
    child = assistant(content=TEXT, provider="openai", model="gpt-5", usage=a["message"]["usage"])
    verdicts = run([header(), user(), a, child])
    assert drops(verdicts) == {child["id"]: ("cleaned_child_duplicate", a["id"])}


def test_99504_a_child_billed_on_its_own_is_a_second_model_turn():
    """Same text, usage of its own: a second call that said the same, not a cleaned copy
    (OpenClaw's replay keeps adjacent identical turns with real usage, #99504)."""
    a = assistant(TEXT, thinking="reasoning")
    child = assistant(content=TEXT, provider="openai", model="gpt-5")
    assert not drops(run([header(), user(), a, child]))
    plain = assistant(TEXT)
    again = assistant(TEXT, usage=plain["message"]["usage"])
    assert not drops(run([header(), user(), plain, again]))


def test_a_zero_usage_receipt_of_a_plain_reply_is_dropped():
    """OpenClaw's bare delivery receipt: right after the reply, no marker, zero usage, stop."""
    a = assistant(TEXT, provider="amazon-bedrock", model="claude-haiku")
    receipt = assistant(TEXT, provider="amazon-bedrock", model="claude-haiku", usage=zero_usage())
    verdicts = run([header(), user(), a, receipt])
    check_drop(
        verdicts[3],
        kind="cleaned_child_duplicate",
        severity=Severity.INFO,
        entry_id=receipt["id"],
        related=a["id"],
        line=4,
    )
    # a custom entry between is no message: still right after the reply
    a = assistant(TEXT)
    receipt = assistant(TEXT, usage=zero_usage(), parent=a["id"])
    assert drops(run([header(), user(), a, custom(), receipt])) == {
        receipt["id"]: ("cleaned_child_duplicate", a["id"])
    }


@pytest.mark.parametrize(
    "shape",
    [
        "usage-absent",
        "stop-length",
        "marker-of-unknown-kind",
        "parent-calls-tools",
        "parent-is-a-mirror",
        "parent-has-an-image",
        "a-tool-result-between",
        "no-lineage",
    ],
)
def test_receipt_near_misses_are_kept(shape):
    a = assistant(TEXT, tool_calls=["c1"] if shape == "parent-calls-tools" else ())
    if shape == "parent-is-a-mirror":
        a = mirror(TEXT)
    if shape == "parent-has-an-image":
        image = {"type": "image", "source": {"type": "url", "url": "https://example.test/a.png"}}
        a = assistant(content=[{"type": "text", "text": TEXT}, image])
    between = [tool_result("c1")] if shape == "a-tool-result-between" else []
    fields: dict = {"usage": None if shape == "usage-absent" else zero_usage()}
    if shape == "stop-length":
        fields["stop_reason"] = "length"
    if shape == "marker-of-unknown-kind":
        fields["openclawDeliveryMirror"] = {"kind": "unknown"}
    parent = None if shape == "no-lineage" else a["id"]
    receipt = assistant(TEXT, parent=parent, **fields)
    assert not drops(run([header(), user(), a, *between, receipt]))


def test_cleaned_child_rule_keeps_its_near_misses():
    a = assistant(TEXT, thinking="reasoning")
    # distinct messages
    assert not drops(run([header(), user(), a, assistant("A different text.")]))
    # equal text separated by a user message (the child still names the reply as parent)
    u = user("say it again")
    assert not drops(run([header(), user(), a, u, assistant(TEXT, parent=a["id"])]))
    # equal text with no parentId lineage (a counted, different usage: not an echo either)
    no_lineage = [header(), user(), a, custom(), assistant(TEXT)]
    assert not drops(run(no_lineage))
    # the child also thinks, or calls tools: not a cleaned copy
    assert not drops(run([header(), user(), a, assistant(TEXT, thinking="again", usage=None)]))
    assert not drops(run([header(), user(), a, assistant(TEXT, tool_calls=["c9"], usage=None)]))


# --- `mistagged_echo` -----------------------------------------------------------------------------

@pytest.mark.parametrize("usage", ["absent", "zero", "identical"])
def test_mistagged_echo_drops_an_echo_carrying_the_reply_metadata(usage):
    a = assistant(TEXT, thinking="think", provider="anthropic", model="claude-opus-4-5")
    echo_usage = {"absent": None, "zero": zero_usage(), "identical": a["message"]["usage"]}[usage]
    cache = custom()
    echo = assistant(TEXT, parent=cache["id"], usage=echo_usage)
    verdicts = run([header(), user(), a, cache, echo])
    alert = check_drop(
        verdicts[4],
        kind="mistagged_echo",
        severity=Severity.WARNING,
        entry_id=echo["id"],
        related=a["id"],
        line=5,
    )
    assert alert.evidence["provider"] == "anthropic"
    assert alert.evidence["model"] == "claude-opus-4-5"
    assert alert.evidence["usage"] == usage


@pytest.mark.parametrize(
    "echo_kwargs",
    [
        {"usage": "counted"},  # a real, separately billed call
        {"provider": "openai"},
        {"model": "claude-sonnet-4-6"},
        {"thinking": "more thinking"},
        {"tool_calls": ["c7"]},
        {"text": "Same start, different reply."},
    ],
)
def test_mistagged_echo_near_misses_are_kept(echo_kwargs):
    a = assistant(TEXT, thinking="think")
    kwargs = {"text": TEXT, "usage": None, "parent": None, **echo_kwargs}
    if kwargs["usage"] == "counted":
        del kwargs["usage"]
    verdicts = run([header(), user(), a, assistant(**kwargs)])
    assert not drops(verdicts)


def test_mistagged_echo_needs_thinking_in_the_earlier_reply_and_adjacency():
    plain = assistant(TEXT)
    assert not drops(run([header(), user(), plain, assistant(TEXT, usage=None, parent=None)]))
    a = assistant(TEXT, thinking="think", tool_calls=["c1"])
    echo = assistant(TEXT, usage=None, parent=None)
    assert not drops(run([header(), user(), a, tool_result("c1"), echo]))


# --- all echo rules ------------------------------------------------------------------------------

@pytest.mark.parametrize("empty", ["", "   \n\t", "[[reply_to_current]]"])
def test_echo_rules_never_fire_on_empty_text(empty):
    a = assistant(empty, thinking="only thinking")
    items = [
        header(),
        user(),
        a,
        mirror(empty),
        cli_copy(empty),
        assistant(empty, parent=a["id"], usage=None),
        assistant(empty, usage=None),
    ]
    verdicts = run(items)
    assert not drops(verdicts)
    assert len(kept(verdicts)) == len(items)


# --- re-parenting --------------------------------------------------------------------------------

def test_cleaned_child_under_a_dropped_mirror_is_dropped_in_the_first_pass():
    """Its cleaned parent is the reply, so a second cleaning would drop it otherwise."""
    a = assistant(TEXT, thinking="thinking")
    m = mirror(TEXT)
    child = assistant(TEXT, provider="openai", model="gpt-5", parent=m["id"], usage=None)
    verdicts = run([header(), user(), a, m, child])
    assert drops(verdicts) == {
        m["id"]: ("delivery_mirror_duplicate", a["id"]),
        child["id"]: ("cleaned_child_duplicate", a["id"]),
    }
    again = run(outputs(verdicts))
    assert not drops(again)


# --- a claude-cli turn written by two writers (#118185, #143106): `cli_aggregate_duplicate` ------

def test_118185_the_cli_record_joining_the_streamed_replies_is_dropped():
    first, result, second = _streamed_turn()
    record = _cli_record(
        "Let me read the config file first.\n\nIt sets the port to 8080.")
    verdicts = run([header(), user("What is in config.yaml?"), first, result, second,
                    custom(), record])
    assert drops(verdicts) == {record["id"]: ("cli_aggregate_duplicate", second["id"])}
    assert kept_ids(verdicts)[2:5] == [first["id"], result["id"], second["id"]]


@pytest.mark.parametrize(
    "text",
    [
        "Let me read the config file first.",
        "It sets the port to 8080.\n\nLet me read the config file first.",
        "Let me read the config file first.\n\nIt sets the port to 8081.",
        "Let me read the config file first. It sets the port to 8080. Done.",
    ],
    ids=["one-of-them", "other-order", "other-words", "more-words"],
)
def test_118185_a_cli_record_that_is_not_the_join_of_the_turns_replies_is_kept(text):
    first, result, second = _streamed_turn()
    verdicts = run([header(), user("What is in config.yaml?"), first, result, second,
                    _cli_record(text)])
    assert not drops(verdicts)


def test_118185_a_join_in_the_next_turn_or_by_another_writer_is_kept():
    first, result, second = _streamed_turn()
    joined = "Let me read the config file first.\n\nIt sets the port to 8080."
    later = [user("Say it all again, please."), _cli_record(joined)]
    model_reply = assistant(joined)  # a model that repeats itself: a reply, not a record
    verdicts = run([header(), user("What is in config.yaml?"), first, result, second,
                    model_reply, *later])
    assert not drops(verdicts)


def test_118185_a_retried_cli_run_under_its_own_key_is_kept():
    """Two `cli-assistant:<runId>` records of one text are two runs; one without a key of its
    own after the first is the gap-fill copy (peer case cli-gap-fill)."""
    first = _cli_record(AGENDA, "run-1")
    retried = _cli_record(AGENDA, "run-2")
    gap_fill = assistant(AGENDA, provider="claude-cli", model="opus", api="cli")
    verdicts = run([header(), user(), first, retried, gap_fill])
    assert drops(verdicts) == {gap_fill["id"]: ("cli_mirror_duplicate", retried["id"])}


# --- a Claude CLI re-import after a resume (#136251): `cli_reimport_duplicate` -------------------

def test_136251_an_import_repeating_the_committed_cli_reply_is_dropped():
    committed = _cli_record(AGENDA)
    imported = _imported(AGENDA)
    verdicts = run([header(), user(), committed, custom(), imported])
    assert drops(verdicts) == {imported["id"]: ("cli_reimport_duplicate", committed["id"])}
    (alert,) = alerts(verdicts, "cli_reimport_duplicate")
    assert alert.evidence["imported_from"] == "claude-cli"


def test_136251_a_commit_after_its_import_is_the_cli_copy():
    imported = _imported(AGENDA)
    committed = _cli_record(AGENDA)
    verdicts = run([header(), user(), imported, committed])
    assert drops(verdicts) == {committed["id"]: ("cli_mirror_duplicate", imported["id"])}


@pytest.mark.parametrize("case", ["next-turn", "other-text", "after-a-model-reply", "tools"])
def test_136251_import_near_misses_are_kept(case):
    reply = assistant(AGENDA) if case == "after-a-model-reply" else _cli_record(AGENDA)
    between = [user("And now?")] if case == "next-turn" else []
    text = "A different answer." if case == "other-text" else AGENDA
    imported = _imported(text, tool_calls=["c9"] if case == "tools" else ())
    verdicts = run([header(), user(), reply, *between, imported])
    assert imported["id"] not in drops(verdicts)


# --- the four duplication shapes of the first real sessions (the seed cases a to d), end to end ---


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
