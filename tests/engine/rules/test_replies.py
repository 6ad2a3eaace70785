"""What the replies of a session say (rules/replies), entry kept: `repetition_cascade`,
`duplicate_storm`, `consecutive_assistant`, `thinking_rejection_loop`, `error_loop` and
`retried_prompt`, and when they stay silent."""

from __future__ import annotations

import pytest

from stream.engine import (
    Action,
    Limits,
    Severity,
)
from tests.support.builders import (
    INVALID_SIGNATURE,
    THINKING_REJECTED,
    alert_kinds,
    alerts,
    assistant,
    custom,
    drops,
    header,
    mirror,
    prompt_error,
    run,
    tool_result,
    user,
    zero_usage,
)
from tests.support.rule_tests import AGENDA, QUEUED, aborted_reply, stamped_with_response, the_alert

UNIT = "The deployment finished and all 14 services report healthy."


def all_kept(verdicts):
    assert all(v.action is Action.KEPT for v in verdicts)


def echo_turn(n, mirrors=1):
    text = f"Reply number {n} with enough words to be a real reply."
    return [user(f"question {n}"), assistant(text), *[mirror(text) for _ in range(mirrors)]]


def clean_turn(n):
    return [user(f"plain question {n}"), assistant(f"Plain answer {n}, no echo this time.")]


def rejected(message=THINKING_REJECTED):
    return assistant(content=[], error=message)


AUTH = '401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}'


def failing_turns(messages):
    items = [header()]
    replies = []
    for message in messages:
        reply = assistant(content=[], error=message)
        replies.append(reply)
        items += [user("hello?"), reply, custom()]
    return items, replies


# --- `repetition_cascade` -------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("copies", "separator"),
    [(2, " "), (3, "\n\n"), (4, "\n"), (5, "")],
)
def test_repetition_cascade_reports_copies_and_unit_length(copies, separator):
    reply = assistant(separator.join([UNIT] * copies))
    verdicts = run([header(), user(), reply])
    all_kept(verdicts)
    alert = the_alert(verdicts, "repetition_cascade")
    assert alert.severity is Severity.WARNING
    assert alert.entry_id == reply["id"]
    assert alert.evidence == {"copies": copies, "unit_length": len(UNIT)}


def test_repetition_cascade_across_text_blocks():
    reply = assistant(content=[{"type": "text", "text": UNIT}] * 3)
    alert = the_alert(run([header(), user(), reply]), "repetition_cascade")
    assert alert.evidence == {"copies": 3, "unit_length": len(UNIT)}


@pytest.mark.parametrize(
    "text",
    [
        UNIT,  # one copy
        "Short unit here!!!" * 3,  # unit of 18 characters
        f"{UNIT} {UNIT[:-1]}!",  # the copies differ in one character
        f"{UNIT} {UNIT} And one more sentence.",  # copies plus a tail
        "",
    ],
    ids=["single", "short-unit", "not-verbatim", "tail", "empty"],
)
def test_repetition_cascade_near_misses(text):
    verdicts = run([header(), user(), assistant(text)])
    assert "repetition_cascade" not in alert_kinds(verdicts)


def test_repetition_cascade_with_a_unit_of_exactly_the_minimum_length():
    unit = "Do it now. Then go!"  # 19 characters: with the unit's own spaces, whitespace varies
    text = f"{unit}\n {unit}  {unit}"
    verdicts = run([header(), user(), assistant(text)], limits=Limits(min_repetition_unit=19))
    assert the_alert(verdicts, "repetition_cascade").evidence == {"copies": 3, "unit_length": 19}


def test_repetition_cascade_uses_the_configured_unit_length():
    text = " ".join(["Short unit here!!!"] * 3)
    verdicts = run([header(), user(), assistant(text)], limits=Limits(min_repetition_unit=10))
    assert the_alert(verdicts, "repetition_cascade").evidence == {"copies": 3, "unit_length": 18}


# --- `duplicate_storm` ----------------------------------------------------------------------------

def test_duplicate_storm_is_raised_once_at_the_third_drop():
    items = [header()]
    for n in range(12):
        items += echo_turn(n)
    verdicts = run(items)
    assert len(drops(verdicts)) == 12
    (storm,) = alerts(verdicts, "duplicate_storm")
    third_mirror = items[3 * 3]
    assert (storm.entry_id, storm.related_entry_id) == (None, third_mirror["id"])
    assert storm.severity is Severity.WARNING
    assert storm.evidence["dropped"] == 3
    assert storm.evidence["window"] == 10


def test_two_drops_in_ten_replies_are_no_storm():
    items = [header(), *echo_turn(0), *clean_turn(1), *clean_turn(2), *echo_turn(3)]
    for n in range(4, 10):
        items += clean_turn(n)
    items += echo_turn(10)  # the first drop has left the window of the last 10 replies
    verdicts = run(items)
    assert len(drops(verdicts)) == 3
    assert not alerts(verdicts, "duplicate_storm")


@pytest.mark.parametrize(("clean_replies", "raised"), [(10, 2), (9, 1)])
def test_duplicate_storm_rearms_after_ten_clean_replies(clean_replies, raised):
    items = [header(), *echo_turn(0, mirrors=3)]
    for n in range(clean_replies - 1):
        items += clean_turn(n)
    # the assistant reply of this turn is the last clean one, then three drops in a row
    items += echo_turn(99, mirrors=3)
    verdicts = run(items)
    assert len(drops(verdicts)) == 6
    assert len(alerts(verdicts, "duplicate_storm")) == raised


# --- `consecutive_assistant` ----------------------------------------------------------------------

def test_consecutive_assistant_info_when_the_earlier_did_not_think():
    first, second = assistant("First reply."), assistant("Second reply.")
    alert = the_alert(run([header(), user(), first, second]), "consecutive_assistant")
    assert alert.severity is Severity.INFO
    assert (alert.entry_id, alert.related_entry_id) == (second["id"], first["id"])


def test_consecutive_assistant_warning_when_the_earlier_thought():
    first = assistant("First reply.", thinking="reasoning")
    verdicts = run([header(), user(), first, custom(), assistant("Second reply.")])
    assert the_alert(verdicts, "consecutive_assistant").severity is Severity.WARNING


def test_a_mirror_between_two_replies_does_not_separate_them():
    first = assistant("First reply.")
    verdicts = run([header(), user(), first, mirror("What was sent"), assistant("Second.")])
    assert the_alert(verdicts, "consecutive_assistant").related_entry_id == first["id"]


@pytest.mark.parametrize(
    "middle",
    [
        lambda: [tool_result("c1")],
        lambda: [user("go on")],
    ],
    ids=["toolResult", "user"],
)
def test_consecutive_assistant_not_across_tool_results_or_users(middle):
    first = assistant("First reply.", tool_calls=["c1"])
    verdicts = run([header(), user(), first, *middle(), assistant("Second reply.")])
    assert "consecutive_assistant" not in alert_kinds(verdicts)


@pytest.mark.parametrize(
    "failed",
    [
        lambda: assistant(content=[], error="429 rate limited"),
        lambda: assistant(content=[], stop_reason="aborted"),
    ],
    ids=["error", "aborted"],
)
def test_a_reply_after_a_failed_one_is_a_retry(failed):
    verdicts = run([header(), user(), failed(), assistant("Second try worked.")])
    assert "consecutive_assistant" not in alert_kinds(verdicts)


def test_mirrors_are_not_model_replies():
    verdicts = run([header(), user(), mirror("one"), mirror("two"), assistant("three")])
    assert "consecutive_assistant" not in alert_kinds(verdicts)
    verdicts = run([header(), user(), assistant("one"), mirror("two")])
    assert "consecutive_assistant" not in alert_kinds(verdicts)


# --- `thinking_rejection_loop` --------------------------------------------------------------------

def test_thinking_rejection_loop_raised_once_per_loop():
    failures = [rejected() for _ in range(4)]
    items = [header()]
    for failure in failures:
        items += [user("please answer"), failure]
    verdicts = run(items)
    all_kept(verdicts)
    alert = the_alert(verdicts, "thinking_rejection_loop")
    assert alert.severity is Severity.CRITICAL
    assert alert.entry_id == failures[1]["id"]
    assert alert.evidence == {"count": 2}


def test_thinking_rejection_loop_rearms_after_a_good_reply():
    items = [header(), user(), rejected(), user(), rejected(), user(), assistant("Finally.")]
    items += [user(), rejected(), user(), rejected()]
    assert alert_kinds(run(items)).count("thinking_rejection_loop") == 2


def test_invalid_thinking_signature_counts():
    items = [header(), user(), rejected(INVALID_SIGNATURE), user(), rejected(INVALID_SIGNATURE)]
    assert the_alert(run(items), "thinking_rejection_loop").evidence == {"count": 2}


@pytest.mark.parametrize(
    "second",
    [
        lambda: rejected("529 overloaded_error"),
        lambda: assistant("A good reply."),
    ],
    ids=["other-error", "success"],
)
def test_thinking_rejection_loop_needs_two_in_a_row(second):
    items = [header(), user(), rejected(), user(), second(), user(), rejected()]
    assert "thinking_rejection_loop" not in alert_kinds(run(items))


def test_thinking_rejection_loop_via_prompt_error_entries():
    first, second = prompt_error(THINKING_REJECTED), prompt_error(THINKING_REJECTED)
    verdicts = run([header(), user(), first, user(), second])
    alert = the_alert(verdicts, "thinking_rejection_loop")
    assert alert.entry_id == second["id"]
    assert alert.evidence == {"count": 2}


def test_one_failure_written_as_prompt_error_and_assistant_error_counts_once():
    items = [header(), user(), prompt_error(THINKING_REJECTED), custom(), rejected()]
    assert "thinking_rejection_loop" not in alert_kinds(run(items))
    second = rejected()
    items += [user(), prompt_error(THINKING_REJECTED), second]
    alert = the_alert(run(items), "thinking_rejection_loop")
    assert alert.evidence == {"count": 2}
    # the loop is counted at the prompt-error of the second failure
    assert alert.entry_id == items[-2]["id"]
    # written the other way round, reply first
    other = [header(), user(), rejected(), prompt_error(THINKING_REJECTED)]
    assert "thinking_rejection_loop" not in alert_kinds(run(other))


def test_prompt_errors_of_other_kinds_do_not_count():
    items = [header(), user(), prompt_error("aborted"), user(), prompt_error("aborted")]
    assert "thinking_rejection_loop" not in alert_kinds(run(items))


# --- `error_loop` ---------------------------------------------------------------------------------

def test_error_loop_after_three_equal_errors_raised_once():
    items, replies = failing_turns([AUTH] * 5)
    verdicts = run(items)
    all_kept(verdicts)
    alert = the_alert(verdicts, "error_loop")
    assert alert.severity is Severity.WARNING
    assert alert.entry_id == replies[2]["id"]
    assert alert.evidence["count"] == 3


@pytest.mark.parametrize(
    "messages",
    [
        [AUTH, AUTH],
        [AUTH, AUTH, "529 overloaded"],
        [AUTH, "529 overloaded", AUTH],
    ],
)
def test_error_loop_needs_three_in_a_row_with_the_same_message(messages):
    items, _ = failing_turns(messages)
    assert "error_loop" not in alert_kinds(run(items))


def test_error_loop_is_broken_by_a_good_reply():
    items, _ = failing_turns([AUTH, AUTH])
    items += [user(), assistant("Works again.")]
    more, _ = failing_turns([AUTH])
    assert "error_loop" not in alert_kinds(run(items + more[1:]))


# --- what every alert carries ---------------------------------------------------------------------

def test_alerts_carry_no_text_unless_snippets_are_opted_into():
    items = [header(), user("q", parent=None), mirror("The secret plan is ready."),
             mirror("The secret plan is ready.")]
    plain = alerts(run(items), "delivery_mirror_duplicate")
    assert all("secret" not in str(a.as_json()) for a in plain)
    (with_snippet,) = alerts(run(items, limits=Limits(snippet_chars=10)),
                             "delivery_mirror_duplicate")
    assert with_snippet.evidence["snippet"] == "The secret"
    assert with_snippet.message == plain[0].message


# --- idle-timeout retry (#95766): `retried_prompt` ------------------------------------------------

def test_95766_an_unkeyed_prompt_repeated_after_an_empty_failure_is_kept_and_reported():
    original = user(AGENDA)
    aborted = aborted_reply()
    again = user(AGENDA)
    verdicts = run([header(), original, aborted, again, assistant("Two meetings.")])
    assert not drops(verdicts)
    (alert,) = alerts(verdicts, "retried_prompt")
    assert (alert.entry_id, alert.related_entry_id, alert.severity) == (
        again["id"], original["id"], "info")
    assert alert.evidence == {"original_id": original["id"]}


@pytest.mark.parametrize(
    "between",
    [
        lambda: [assistant("You have two meetings.")],
        lambda: [assistant("Let me look.", tool_calls=["c1"]), tool_result("c1")],
        lambda: [assistant("Partial answer", stop_reason="aborted", error="idle timeout")],
        lambda: [],
    ],
    ids=["answered", "tool-call", "aborted-with-text", "nothing-between"],
)
def test_95766_a_prompt_repeated_after_anything_but_an_empty_failure_is_not_a_retry(between):
    verdicts = run([header(), user(AGENDA), *between(), user(AGENDA)])
    assert not alerts(verdicts, "retried_prompt")


def test_95766_another_prompt_after_an_empty_failure_is_not_a_retry():
    verdicts = run([header(), user(AGENDA), aborted_reply(),
                    user("Never mind, what about Friday?")])
    assert not alerts(verdicts, "retried_prompt")


# --- #83404: queued follow-ups re-appended by each fallback candidate: `retried_prompt` ----------

def test_83404_queued_prompts_appended_again_by_each_fallback_candidate_are_kept_and_reported():
    """#83404 (2026.5.x): each fallback candidate persisted the queued prompt again, without a
    key and at its own time, with an error stub between. Nothing tells them from a person
    sending the words again: kept, each reported as a retried prompt of the first."""
    first = stamped_with_response(user(QUEUED), 1779100000000)
    items = [header(), user("deploy"), assistant("Deploying."), first]
    again = []
    for i in range(3):
        items.append(assistant(content=[], error="HTTP 500 from upstream", usage=zero_usage()))
        copy_ = stamped_with_response(user(QUEUED), 1779100001000 + i * 1000)
        again.append(copy_)
        items.append(copy_)
    verdicts = run(items)
    assert not drops(verdicts)
    reported = alerts(verdicts, "retried_prompt")
    assert [a.entry_id for a in reported] == [c["id"] for c in again]
    # each copy kept opens a turn of its own, which the next one retries
    retried = [first["id"], *(c["id"] for c in again[:-1])]
    assert [a.evidence["original_id"] for a in reported] == retried
