"""Detection rules 7-14 and 18: the entry is kept, an alert says what looks wrong, and when not."""

from __future__ import annotations

import pytest

from stream.engine import Action, Engine, Limits, Severity
from tests.support.builders import (
    INVALID_SIGNATURE,
    THINKING_REJECTED,
    alert_kinds,
    alerts,
    assistant,
    custom,
    drops,
    encode,
    entry,
    header,
    kept_ids,
    mirror,
    new_session,
    process,
    prompt_error,
    run,
    tool_result,
    user,
)

UNIT = "The deployment finished and all 14 services report healthy."


def the_alert(verdicts, kind):
    (alert,) = alerts(verdicts, kind)
    assert alert.action is Action.KEPT
    assert alert.session_id == "s1"
    return alert


def all_kept(verdicts):
    assert all(v.action is Action.KEPT for v in verdicts)


# --- rule 7: repetition_cascade -----------------------------------------------------------------


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


# --- rule 8: duplicate_storm --------------------------------------------------------------------


def echo_turn(n, mirrors=1):
    text = f"Reply number {n} with enough words to be a real reply."
    return [user(f"question {n}"), assistant(text), *[mirror(text) for _ in range(mirrors)]]


def clean_turn(n):
    return [user(f"plain question {n}"), assistant(f"Plain answer {n}, no echo this time.")]


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


# --- rule 9: consecutive_assistant --------------------------------------------------------------


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


# --- rule 10: thinking_rejection_loop -----------------------------------------------------------


def rejected(message=THINKING_REJECTED):
    return assistant(content=[], error=message)


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


# --- rule 11: error_loop ------------------------------------------------------------------------


AUTH = '401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}'


def failing_turns(messages):
    items = [header()]
    replies = []
    for message in messages:
        reply = assistant(content=[], error=message)
        replies.append(reply)
        items += [user("hello?"), reply, custom()]
    return items, replies


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


# --- rule 12: dangling_parent -------------------------------------------------------------------


def test_dangling_parent_when_the_session_was_seen_from_its_start():
    orphan = assistant("Answer to a deleted question.", parent="76dd5055")
    verdicts = run([header(), user(parent=None), assistant("Hi."), orphan])
    alert = the_alert(verdicts, "dangling_parent")
    assert alert.severity is Severity.WARNING
    assert alert.entry_id == orphan["id"]
    assert alert.related_entry_id == "76dd5055"
    assert alert.evidence == {"parent_id": "76dd5055"}
    assert kept_ids(verdicts)[-1] == orphan["id"]


@pytest.mark.parametrize(
    "start",
    [
        lambda: [user(parent=None)],  # no header: maybe not the start
        lambda: [header(), user(parent="11965453")],  # the first entry has a parent
        lambda: [user(parent=None), header()],  # the header is not first
    ],
    ids=["no-header", "first-has-parent", "header-late"],
)
def test_dangling_parent_is_silent_when_the_start_was_not_seen(start):
    items = [*start(), assistant("Hi."), assistant("Orphan.", parent="76dd5055")]
    assert "dangling_parent" not in alert_kinds(run(items))


def test_a_dropped_parent_is_not_dangling():
    text = "Sent the invoice to the accountant."
    m = mirror(text)
    after = custom(parent=m["id"])
    verdicts = run([header(), user(parent=None), assistant(text), m, after])
    assert list(drops(verdicts)) == [m["id"]]
    assert "dangling_parent" not in alert_kinds(verdicts)


def test_dangling_parent_is_silent_after_forgetting():
    items = [header(), user(parent=None)]
    items += [assistant(f"reply {n}", tool_calls=[f"c{n}"]) for n in range(6)]
    items += [assistant("Orphan.", parent="76dd5055")]
    assert "dangling_parent" in alert_kinds(run(items, limits=Limits(max_ids=100)))
    assert "dangling_parent" not in alert_kinds(run(items, limits=Limits(max_ids=4)))


# --- rule 13: branch_fork -----------------------------------------------------------------------


def test_branch_fork_on_a_second_child():
    a = assistant("Which one?")
    first, second = user("the red one"), user("actually the blue one", parent=a["id"])
    verdicts = run([header(), user(), a, first, second])
    alert = the_alert(verdicts, "branch_fork")
    assert alert.severity is Severity.INFO
    assert alert.entry_id == second["id"]
    assert alert.related_entry_id == a["id"]
    assert alert.evidence == {"parent_id": a["id"], "first_child_id": first["id"]}


def test_branch_fork_exemptions():
    a = assistant("Sending.", tool_calls=["call_1"])
    items = [
        header(),
        user(),
        a,
        mirror("1+1 sama dengan bahlil", parent=a["id"]),
        tool_result("call_1", parent=a["id"]),
        entry("custom_message", parent=a["id"], appendMode="side", content="side note"),
        mirror("a second delivery", parent=a["id"]),
    ]
    assert "branch_fork" not in alert_kinds(run(items))
    # a toolResult under a parent that did not make its call is a fork
    b = assistant("Other.", tool_calls=["call_2"])
    c = assistant("Next.", tool_calls=["call_3"])
    stray = tool_result("call_3", parent=b["id"])
    verdicts = run([header(), user(), b, tool_result("call_2"), c, stray])
    assert [x.entry_id for x in alerts(verdicts, "branch_fork")] == [stray["id"]]


def test_a_child_reparented_past_a_dropped_mirror_is_no_fork():
    text = "Here is the summary you asked for."
    a = assistant(text)
    verdicts = run([header(), user(), a, mirror(text), user("thanks")])
    assert len(drops(verdicts)) == 1
    assert "branch_fork" not in alert_kinds(verdicts)


# --- rule 14: orphaned_tool_call and unknown_tool_result ---------------------------------------


def test_orphaned_tool_call_when_a_user_message_ends_the_turn():
    a = assistant("Checking two things.", tool_calls=["c1", "c2"])
    ender = user("hello?")
    verdicts = run([header(), user(), a, tool_result("c1"), ender, assistant("Sorry.")])
    alert = the_alert(verdicts, "orphaned_tool_call")
    assert alert.severity is Severity.WARNING
    assert alert.entry_id == a["id"]
    assert alert.evidence == {"tool_call_id": "c2", "turn_ended_by": ender["id"]}
    assert alert.source.line == 5


def test_no_orphaned_tool_call_while_the_turn_is_open_or_answered():
    a = assistant("Checking.", tool_calls=["c1", "c2"])
    open_turn = [header(), user(), a, tool_result("c1")]
    assert "orphaned_tool_call" not in alert_kinds(run(open_turn))
    answered = [*open_turn, tool_result("c2"), assistant("Done."), user("thanks")]
    assert "orphaned_tool_call" not in alert_kinds(run(answered))


def test_each_orphaned_call_gets_its_own_alert():
    a = assistant("Three at once.", tool_calls=["c1", "c2", "c3"])
    verdicts = run([header(), user(), a, user("stop")])
    found = alerts(verdicts, "orphaned_tool_call")
    assert sorted(x.evidence["tool_call_id"] for x in found) == ["c1", "c2", "c3"]
    assert len({x.id for x in found}) == 3


def test_unknown_tool_result():
    stray = tool_result("call_never_made")
    verdicts = run([header(), user(parent=None), assistant("Hm."), stray])
    alert = the_alert(verdicts, "unknown_tool_result")
    assert alert.severity is Severity.WARNING
    assert alert.entry_id == stray["id"]
    assert alert.evidence == {"tool_call_id": "call_never_made"}


def test_tool_result_of_a_known_call_or_of_an_unseen_start_is_not_unknown():
    a = assistant("Looking.", tool_calls=["c1"])
    assert "unknown_tool_result" not in alert_kinds(
        run([header(), user(parent=None), a, tool_result("c1")])
    )
    partial = [header(), user(parent="earlier"), tool_result("call_from_before")]
    assert "unknown_tool_result" not in alert_kinds(run(partial))


def test_alerts_carry_no_text_unless_snippets_are_opted_into():
    items = [header(), user("q", parent=None), mirror("The secret plan is ready."),
             mirror("The secret plan is ready.")]
    plain = alerts(run(items), "delivery_mirror_duplicate")
    assert all("secret" not in str(a.as_json()) for a in plain)
    (with_snippet,) = alerts(run(items, limits=Limits(snippet_chars=10)),
                             "delivery_mirror_duplicate")
    assert with_snippet.evidence["snippet"] == "The secret"
    assert with_snippet.message == plain[0].message


# --- detection 18: session_seen_midway ----------------------------------------------------------


def test_a_session_first_seen_after_its_header_is_named_once():
    reply = assistant("The backup finished at 03:12.", parent="u-before")
    verdicts = run([reply, mirror("The backup finished at 03:12."), user("thanks")])
    (alert,) = alerts(verdicts, "session_seen_midway")
    assert alert.action is Action.KEPT and alert.severity is Severity.WARNING
    assert (alert.session_id, alert.entry_id, alert.related_entry_id) == ("s1", None, reply["id"])
    assert alert.evidence == {"first_entry_type": "message"}
    # what it warns of: the mirror repeats a reply, and is dropped only because the reply was
    # seen; a copy of an entry from before the first one seen would be kept
    assert alert_kinds(verdicts).count("session_seen_midway") == 1


@pytest.mark.parametrize(
    "start",
    [
        lambda: [header(), user(parent=None)],  # from the start
        lambda: [header(), user(parent="u-0")],  # the header, then an excerpt: header seen
    ],
)
def test_a_session_seen_from_its_header_is_not_named(start):
    verdicts = run([*start(), assistant("Hi.")])
    assert "session_seen_midway" not in alert_kinds(verdicts)


def test_a_session_whose_state_exists_is_not_named_again():
    engine, session = Engine(), new_session()
    lines = encode([user(parent="u-0"), assistant("Hi."), user("more"), assistant("Sure.")])
    first = process(engine, session, lines[:2])
    # later records of the same session, with the state the first ones left
    later = process(engine, session, lines[2:], first=3)
    assert alert_kinds(first) == ["session_seen_midway"]
    assert "session_seen_midway" not in alert_kinds(later)


def test_a_replayed_first_record_is_not_named_again():
    engine, session = Engine(), new_session()
    lines = encode([user(parent="u-0"), assistant("Hi.")])
    process(engine, session, lines)
    # the same records from the same source again (a restart after a crash): a replay
    replayed = process(engine, session, lines)
    assert [v.action for v in replayed] == [Action.KEPT, Action.KEPT]
    assert "session_seen_midway" not in alert_kinds(replayed)
