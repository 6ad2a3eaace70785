"""The shape of the transcript tree and of tool calls (rules/structure, rules/tree): re-parenting
around a dropped copy, `dangling_parent`, `branch_fork`, `orphaned_tool_call` and
`unknown_tool_result`, and a session met mid-way (`session_seen_midway`)."""

from __future__ import annotations

import json

import pytest

from stream.engine import (
    Action,
    Engine,
    Limits,
    Severity,
)
from tests.support.builders import (
    alert_kinds,
    alerts,
    assert_valid_tree,
    assistant,
    custom,
    drops,
    encode,
    entry,
    header,
    kept,
    kept_ids,
    mirror,
    new_session,
    parents,
    process,
    run,
    tool_result,
    user,
)
from tests.support.rule_tests import AGENDA, TEXT, channel_final, cli_copy, the_alert

# --- re-parenting --------------------------------------------------------------------------------

def test_child_of_a_dropped_entry_is_reparented_and_only_it_is_reserialized():
    a = assistant(TEXT)
    m = mirror(TEXT)
    level = {"type": "thinking_level_change", "id": "lvl1", "parentId": m["id"], "level": "low"}
    nxt = user("and another thing")
    items = [header(), user(), a, m, level, nxt]
    lines = encode(items)
    # Unusual spacing survives on every line that is not re-parented.
    lines[2] = lines[2].replace(b'","', b'", "')
    verdicts = process(Engine(), new_session(), lines)
    assert drops(verdicts) == {m["id"]: ("delivery_mirror_duplicate", a["id"])}
    out = [v.output for v in verdicts]
    for index in (0, 1, 2, 5):
        assert out[index] == lines[index]
    reparented = json.loads(out[4])
    assert reparented == {**json.loads(lines[4]), "parentId": a["id"]}
    assert list(reparented) == list(json.loads(lines[4]))  # key order kept
    assert_valid_tree(verdicts)


def test_reparenting_skips_a_chain_of_dropped_entries():
    a = assistant(TEXT)
    m = mirror(TEXT)
    c = cli_copy(TEXT)
    after = user("next question")
    verdicts = run([header(), user(), a, m, c, after])
    assert set(drops(verdicts)) == {m["id"], c["id"]}
    assert kept(verdicts)[-1]["parentId"] == a["id"]
    assert_valid_tree(verdicts)


# --- `dangling_parent` ----------------------------------------------------------------------------

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


# --- `branch_fork` --------------------------------------------------------------------------------

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


# --- `orphaned_tool_call` and `unknown_tool_result` -----------------------------------------------

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


# --- the tree around side entries and leaf controls (#100360) ------------------------------------

def test_100360_side_mirrors_and_leaf_controls_are_no_first_children():
    """A message-tool mirror written beside the branch, and the `leaf` that moves the branch
    back, take no entry's place: the next real entry below the reply is no fork."""
    reply = assistant(AGENDA, tool_calls=["call_m1"])
    side = mirror("Here is the report.", kind="message-tool-source-reply",
                  entry_extra={"appendMode": "side"})
    leaf = entry("leaf", parent=side["id"], targetId=reply["id"], appendMode="side")
    result = tool_result("call_m1", parent=reply["id"])
    verdicts = run([header(), user(), reply, side, leaf, result])
    assert not alerts(verdicts, "branch_fork")
    assert not drops(verdicts)


def test_100360_an_entry_moved_around_a_dropped_copy_is_no_fork():
    """#126090's placement: the mirror hangs below the reply beside the cache-ttl entry, the
    next user turn below the mirror. Dropping the mirror moves that turn below the reply."""
    reply = assistant(AGENDA, __openclaw={"mirrorIdentity": "run-1:assistant"})
    ttl = custom(parent=reply["id"])
    final = channel_final(AGENDA, "tg-1")
    final["parentId"] = reply["id"]
    nxt = user("thanks", parent=final["id"])
    verdicts = run([header(), user(), reply, ttl, final, nxt])
    assert drops(verdicts) == {final["id"]: ("delivery_mirror_duplicate", reply["id"])}
    assert parents(verdicts)[nxt["id"]] == reply["id"]
    assert not alerts(verdicts, "branch_fork")


def test_100360_a_real_fork_is_still_reported():
    reply = assistant(AGENDA)
    first = user("thanks")
    other = user("wait, one more thing", parent=reply["id"])
    verdicts = run([header(), user(), reply, first, other])
    (alert,) = alerts(verdicts, "branch_fork")
    assert alert.entry_id == other["id"]


# --- `session_seen_midway` ------------------------------------------------------------------------


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
