"""The duplicate shapes OpenClaw users reported after the first four (#115389 and later): each
rule firing on the shape from its thread, and the near misses it must keep."""

from __future__ import annotations

import pytest

from stream.engine import Limits
from tests.support.builders import (
    alerts,
    assert_clean_twice_is_clean,
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
    parents,
    run,
    tool_result,
    user,
    zero_usage,
)

TEXT = "Tomorrow you have a 10:00 standup and a 14:00 review."


# --- inbound user turn written twice (#115389, #116409, #126680): rule 2 ------------------------


def test_a_sibling_copy_of_the_user_turn_is_dropped_and_its_reply_hangs_below_the_original():
    """Two writers enrol one inbound: the copy (same key, same content, another id) is a
    sibling of the original, and the model answered below the copy. The reply must stay on
    the branch of the user's question, so it moves to the original, not to their parent."""
    a0 = assistant("Hi! How can I help?")
    original = user(TEXT, idempotency_key="EF5ADAB8:user")
    copy = user(TEXT, idempotency_key="EF5ADAB8:user", parent=a0["id"])
    reply = assistant("You have two meetings.", parent=copy["id"])
    verdicts = run([header(), user("hi"), a0, original, copy, reply])
    assert drops(verdicts) == {copy["id"]: ("idempotent_replay", original["id"])}
    assert parents(verdicts)[reply["id"]] == original["id"]
    assert not alerts(verdicts, "branch_fork")
    assert_valid_tree(verdicts)
    assert_clean_twice_is_clean(verdicts)


def test_a_second_delivery_after_the_first_reply_keeps_both_replies_below_the_original():
    """#126680: the copy came after the first reply and got its own model call: both replies
    are real, and the second answers the same input, so it moves below the original."""
    original = user(TEXT, idempotency_key="k:user")
    first = assistant("You have two meetings.")
    copy = user(TEXT, idempotency_key="k:user")
    second = assistant("Two meetings tomorrow: standup and review.")
    verdicts = run([header(), original, first, copy, second])
    assert drops(verdicts) == {copy["id"]: ("idempotent_replay", original["id"])}
    assert parents(verdicts)[second["id"]] == original["id"]
    assert [a.kind for a in alerts(verdicts)] == ["idempotent_replay", "consecutive_assistant"]
    assert_valid_tree(verdicts)
    assert_clean_twice_is_clean(verdicts)


@pytest.mark.parametrize(
    "first",
    [
        lambda: assistant("You have two meetings."),
        lambda: assistant("You have two meetings.", thinking="Two events tomorrow."),
    ],
    ids=["plain-reply", "reply-with-thinking"],
)
def test_a_second_delivery_reply_with_the_first_text_and_zero_usage_is_kept(first):
    """The developers' note on #126680: the second delivery's reply repeats the first reply's
    text with a usage of zeros. With the user copy between them dropped it would look like
    the first reply's delivery receipt or cleaned child (rule 5) or its echo (rule 6), in this
    cleaning or the next; it answers the original, so it hangs there and is no copy."""
    original = user(TEXT, idempotency_key="k:user")
    reply = first()
    copy = user(TEXT, idempotency_key="k:user")
    second = assistant("You have two meetings.", usage=zero_usage())
    verdicts = run([header(), original, reply, copy, second])
    assert drops(verdicts) == {copy["id"]: ("idempotent_replay", original["id"])}
    assert parents(verdicts)[second["id"]] == original["id"]
    assert_valid_tree(verdicts)
    assert_clean_twice_is_clean(verdicts)


def test_a_receipt_below_the_reply_to_a_second_delivery_is_still_dropped():
    """The near miss: below the second delivery's reply, its own receipt is a copy."""
    original = user(TEXT, idempotency_key="k:user")
    copy = user(TEXT, idempotency_key="k:user")
    second = assistant("Two meetings tomorrow.")
    receipt = assistant("Two meetings tomorrow.", usage=zero_usage())
    verdicts = run([header(), original, assistant("You have two meetings."), copy, second,
                    receipt])
    assert drops(verdicts) == {
        copy["id"]: ("idempotent_replay", original["id"]),
        receipt["id"]: ("cleaned_child_duplicate", second["id"]),
    }
    assert_clean_twice_is_clean(verdicts)


@pytest.mark.parametrize(
    "second",
    [
        lambda parent: user(TEXT, idempotency_key="k2:user", parent=parent),
        lambda parent: user(TEXT, parent=parent),
        lambda parent: user(TEXT + " Thanks.", idempotency_key="k1:user", parent=parent),
    ],
    ids=["other-key", "no-key", "other-text"],
)
def test_a_user_sending_again_is_never_a_copy(second):
    a0 = assistant("Hi! How can I help?")
    first = user(TEXT, idempotency_key="k1:user")
    again = second(a0["id"])
    verdicts = run([header(), user("hi"), a0, first, again, assistant("Sure.")])
    assert not drops(verdicts)


# --- idle-timeout retry (#95766): rule 2, and detection 15 -------------------------------------


def _aborted(error: str = "LLM idle timeout (120s): no response from model", **fields):
    return assistant(content=[], usage=zero_usage(), stop_reason="aborted", error=error, **fields)


def test_a_keyed_retry_after_an_idle_timeout_is_dropped_and_the_retry_reply_kept():
    """Since the fix the harness moves back to the user's parent (a `leaf`) before the
    retry, so the replayed prompt is a sibling of the original: the reply moves to it."""
    a0 = assistant("Hi!")
    original = user(TEXT, idempotency_key="run-7:user")
    aborted = _aborted()
    leaf = entry("leaf", targetId=a0["id"])
    again = user(TEXT, idempotency_key="run-7:user", parent=a0["id"])
    reply = assistant("You have two meetings.")
    verdicts = run([header(), user("hi"), a0, original, aborted, leaf, again, reply])
    assert drops(verdicts) == {again["id"]: ("idempotent_replay", original["id"])}
    assert parents(verdicts)[reply["id"]] == original["id"]
    assert not alerts(verdicts, "retried_prompt")


def test_an_unkeyed_prompt_repeated_after_an_empty_failure_is_kept_and_reported():
    original = user(TEXT)
    aborted = _aborted()
    again = user(TEXT)
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
def test_a_prompt_repeated_after_anything_but_an_empty_failure_is_not_a_retry(between):
    verdicts = run([header(), user(TEXT), *between(), user(TEXT)])
    assert not alerts(verdicts, "retried_prompt")


def test_another_prompt_after_an_empty_failure_is_not_a_retry():
    verdicts = run([header(), user(TEXT), _aborted(), user("Never mind, what about Friday?")])
    assert not alerts(verdicts, "retried_prompt")


# --- subagent announce / settle-wake retries (#121187, #153417): rule 2a -----------------------

WAKE = (
    "[Subagent Context] Every subagent in this batch has now settled.\n\n"
    "The diagnostics finished: KEEP_DIAG_OK."
)
BASE = "announce:requester-settle:main:agent:main:dashboard:run-b:yield-1"


def _wake(key: str, text: str = WAKE) -> dict:
    return user(
        text,
        idempotency_key=key,
        provenance={"kind": "inter_session", "sourceTool": "subagent_settle"},
    )


def test_a_retried_settle_wake_with_the_same_content_is_dropped():
    first = _wake(BASE)
    answer = assistant("The diagnostics finished.")
    retry1 = _wake(BASE + ":retry-1")
    again = assistant("NO_REPLY")
    retry2 = _wake(BASE + ":retry-2")
    verdicts = run([header(), user("run the diagnostics"), first, answer, retry1, again, retry2])
    assert drops(verdicts) == {
        retry1["id"]: ("announce_retry_duplicate", first["id"]),
        retry2["id"]: ("announce_retry_duplicate", first["id"]),
    }
    # the model's answer to the retry is a real model call: kept, after the first answer
    assert parents(verdicts)[again["id"]] == answer["id"]
    (alert,) = alerts(verdicts, "announce_retry_duplicate")[:1]
    assert alert.evidence == {"idempotency_key": BASE + ":retry-1"}
    assert_clean_twice_is_clean(verdicts)


@pytest.mark.parametrize(
    "key,text",
    [
        (BASE + ":retry-1", WAKE + "\nA second child finished too."),
        (BASE.replace("yield-1", "yield-2") + ":retry-1", WAKE),
        ("channel-final:m1:0:retry-1", WAKE),
        (BASE + ":retry-0", WAKE),
        (BASE + ":active-wake", WAKE),
    ],
    ids=["other-content", "other-batch", "not-an-announce", "no-retry-number", "other-path"],
)
def test_wake_near_misses_are_kept(key, text):
    first = _wake(BASE) if not key.startswith("channel") else _wake("channel-final:m1:0")
    verdicts = run([header(), first, assistant("Done."), _wake(key, text)])
    assert not drops(verdicts)


def test_the_user_turn_of_a_retried_settle_wake_is_dropped():
    """2026.9.6: the wake's key is the run id of the turn it starts, and the turn's user
    message is keyed `<runId>:user`, so a retry's ends `:retry-N:user`."""
    first = _wake(BASE + ":user")
    answer = assistant("The diagnostics finished.")
    retry = _wake(BASE + ":retry-1:user")
    verdicts = run([header(), user("run the diagnostics"), first, answer, retry,
                    assistant("NO_REPLY")])
    assert drops(verdicts) == {retry["id"]: ("announce_retry_duplicate", first["id"])}
    assert_clean_twice_is_clean(verdicts)


def test_the_aborted_partial_of_a_retried_wake_run_is_dropped():
    """`captureAbortedPartial` keys the partial reply of a run `<runId>:assistant`."""
    partial = assistant("Checking the children", idempotency_key=BASE + ":assistant",
                        usage=zero_usage(), stop_reason="aborted")
    retried = assistant("Checking the children", idempotency_key=BASE + ":retry-2:assistant",
                        usage=zero_usage(), stop_reason="aborted",
                        content=partial["message"]["content"])
    verdicts = run([header(), _wake(BASE + ":user"), partial, _wake(BASE + ":retry-2:user"),
                    retried])
    assert drops(verdicts)[retried["id"]] == ("announce_retry_duplicate", partial["id"])


@pytest.mark.parametrize(
    "first_key,retry_key,text",
    [
        (BASE + ":user", BASE + ":retry-1:user", WAKE + "\nA second child finished too."),
        (BASE + ":user", BASE + ":retry-1:assistant", WAKE),
        (BASE, BASE + ":retry-1:user", WAKE),
        (BASE + ":user", BASE.replace("yield-1", "yield-2") + ":retry-1:user", WAKE),
    ],
    ids=["other-content", "other-role-suffix", "first-without-turn-suffix", "other-batch"],
)
def test_retried_wake_turn_near_misses_are_kept(first_key, retry_key, text):
    verdicts = run([header(), _wake(first_key), assistant("Done."), _wake(retry_key, text)])
    assert not drops(verdicts)


# --- overflow-recovery and compaction rewrites (#89387, #115310): rule 2b -----------------------


def _stamped(item: dict, ms: int) -> dict:
    item["message"]["timestamp"] = ms
    return item


def _copy(item: dict, copy_id: str, parent: str | None, **envelope) -> dict:
    """What OpenClaw's rewrite appends: the same `message`, a new id, parent and time."""
    copied = {key: value for key, value in item.items() if key not in ("id", "parentId")}
    return {"type": item["type"], "id": copy_id, "parentId": parent, **envelope,
            **{k: v for k, v in copied.items() if k != "type"}}


def _session_with_a_large_result():
    u1 = _stamped(user("read the log", id="u1", parent=None), 1_796_100_001_000)
    a1 = _stamped(assistant(None, tool_calls=["call_1"], id="a1"), 1_796_100_002_000)
    t1 = _stamped(tool_result("call_1", "LOG " + "x" * 400, id="t1"), 1_796_100_003_000)
    a2 = _stamped(assistant("The log shows 3 errors.", id="a2"), 1_796_100_004_000)
    c1 = custom(id="c1")
    u2 = _stamped(user("fix them", id="u2", idempotency_key="run-2:user"), 1_796_100_007_000)
    a3 = _stamped(assistant("Fixed all three.", id="a3"), 1_796_100_008_000)
    return [u1, a1, t1, a2, c1, u2, a3]


def _recovery(originals, **envelope):
    """The tool result truncated beside the original, then every later entry again."""
    _, _, t1, a2, c1, u2, a3 = originals
    replacement = _stamped(tool_result("call_1", "LOG xxx…[truncated]", id="T1", parent="a1"),
                           t1["message"]["timestamp"])
    replacement.update(envelope)
    copies = [
        _copy(a2, "A2", "T1", **envelope),
        _copy(c1, "C1", "A2", **envelope),
        _copy(u2, "U2", "C1", **envelope),
        _copy(a3, "A3", "U2", **envelope),
    ]
    return replacement, copies


@pytest.mark.parametrize("era", ["jsonl", "sqlite"])
def test_a_rewrite_branch_drops_its_copies_and_keeps_the_new_entry(era):
    originals = _session_with_a_large_result()
    envelope = {"appendMode": "side"} if era == "sqlite" else {}
    replacement, copies = _recovery(originals, **envelope)
    after = [entry("leaf", id="L", parent="A3", targetId="A3")] if era == "sqlite" else []
    follow = assistant("Anything else?", id="a4", parent="A3")
    verdicts = run([header(), *originals, replacement, *copies, *after, follow])
    assert drops(verdicts) == {
        "A2": ("rewrite_copy", "a2"),
        "U2": ("idempotent_replay", "u2"),
        "A3": ("rewrite_copy", "a3"),
    }
    # the truncated result is new; the custom entry's copy is kept, as OpenClaw never merges
    # them; the conversation continues below the original tail
    out = parents(verdicts)
    assert out["T1"] == "a1" and out["C1"] == "a2" and out["a4"] == "a3"
    if era == "sqlite":
        (leaf,) = [v for v in kept(verdicts) if v["id"] == "L"]
        assert (leaf["parentId"], leaf["targetId"]) == ("a3", "a3")
    # no false fork: the rewritten result answers its parent's own call, the rest moved
    # around copies, the leaf is nobody's first child
    assert not alerts(verdicts, "branch_fork")
    assert_valid_tree(verdicts)
    assert_clean_twice_is_clean(verdicts)


def test_a_copied_unkeyed_user_message_is_a_rewrite_copy_too():
    originals = _session_with_a_large_result()
    del originals[5]["message"]["idempotencyKey"]
    replacement, copies = _recovery(originals)
    verdicts = run([header(), *originals, replacement, *copies])
    assert drops(verdicts)["U2"] == ("rewrite_copy", "u2")


def test_a_compaction_copied_by_a_rewrite_is_dropped():
    originals = _session_with_a_large_result()
    compaction = entry("compaction", id="cp1", parent="c1", summary="Earlier: the log.",
                       firstKeptEntryId="a2", tokensBefore=91234, tokensAfter=1200)
    originals[5]["parentId"] = "cp1"
    originals.insert(5, compaction)
    replacement, copies = _recovery([*originals[:5], *originals[6:]])
    copy = {**compaction, "id": "CP", "parentId": "C1", "firstKeptEntryId": "A2"}
    copies[2]["parentId"] = "CP"
    verdicts = run([header(), *originals, replacement, *copies[:2], copy, *copies[2:]])
    assert drops(verdicts)["CP"] == ("rewrite_copy", "cp1")
    assert drops(verdicts)["A3"] == ("rewrite_copy", "a3")


def test_identical_turns_one_below_the_other_are_two_turns():
    """Replay-history keeps two adjacent identical replies: the second hangs below the first,
    not where a copy of the first would."""
    a = _stamped(assistant(TEXT, id="a"), 1_796_100_004_000)
    twin = {**a, "id": "twin", "parentId": "a"}
    assert not drops(run([header(), user(), a, twin]))


@pytest.mark.parametrize("change", ["usage", "unstamped", "elsewhere", "regenerated"])
def test_rewrite_near_misses_are_kept(change):
    originals = _session_with_a_large_result()
    replacement, copies = _recovery(originals)
    a2_copy = copies[0]
    if change == "usage":  # a new model call with the same words
        a2_copy["message"] = {**a2_copy["message"], "usage": {"input": 1, "output": 2}}
    elif change == "unstamped":  # nothing says when it was written
        for item in (originals[3], a2_copy):
            item["message"] = {k: v for k, v in item["message"].items() if k != "timestamp"}
    elif change == "elsewhere":  # the same payload where no copy of its parent is
        a2_copy["parentId"] = "u1"
    else:  # a regenerated reply beside the first: its own time
        a2_copy["message"] = {**a2_copy["message"], "timestamp": 1_796_100_009_000}
    verdicts = run([header(), *originals, replacement, a2_copy])
    assert "A2" not in drops(verdicts)


# --- the same message persisted again (#95766, #128472, #66443, #72511): rule 2c ----------------


def test_a_prompt_replayed_byte_for_byte_after_an_idle_timeout_is_dropped():
    """#128472: an unkeyed prompt, an empty aborted reply, then the same `message` again, its
    numeric timestamp included: the same message persisted twice. The reply to the replay
    answers the original."""
    original = _stamped(user(TEXT), 1_796_200_001_000)
    aborted = _stamped(_aborted(error="LLM idle timeout (60s): no response from model"),
                       1_796_200_061_000)
    again = {**original, "id": "again", "parentId": aborted["id"]}
    reply = assistant("You have two meetings.", parent="again")
    verdicts = run([header(), original, aborted, again, reply])
    assert drops(verdicts) == {"again": ("persisted_copy", original["id"])}
    assert parents(verdicts)[reply["id"]] == original["id"]
    (alert,) = alerts(verdicts, "persisted_copy")
    assert alert.evidence == {"payload": f"{_payload(original):08x}", "type": "message"}
    assert not alerts(verdicts, "retried_prompt")
    assert_valid_tree(verdicts)
    assert_clean_twice_is_clean(verdicts)


def _payload(item: dict) -> int:
    from stream.engine.entry import parse

    return parse(encode([item])[0]).payload


def test_the_same_words_typed_again_after_an_idle_timeout_are_kept_and_reported():
    """A person sending the prompt again: a new timestamp, so another message."""
    original = _stamped(user(TEXT), 1_796_200_001_000)
    again = _stamped(user(TEXT), 1_796_200_090_000)
    verdicts = run([header(), original, _aborted(), again, assistant("Two meetings.")])
    assert not drops(verdicts)
    (alert,) = alerts(verdicts, "retried_prompt")
    assert alert.related_entry_id == original["id"]


def _compaction(id: str, parent: str, first_kept: str = "u2", tokens: int = 91234) -> dict:
    return entry("compaction", id=id, parent=parent, summary="Earlier: the log had 3 errors.",
                 firstKeptEntryId=first_kept, tokensBefore=tokens)


def test_a_line_of_copies_after_a_compaction_is_dropped():
    """#66443, #72511: after a compaction the same user turns and compactions are appended
    again, each below the previous copy, only the ids new. The first user copy is the same
    message persisted again; what follows it stands beside its original (rule 2b)."""
    u1 = _stamped(user("read the log", id="u1", parent=None), 1_796_100_001_000)
    a1 = _stamped(assistant("3 errors.", id="a1"), 1_796_100_002_000)
    u2 = _stamped(user("fix them", id="u2"), 1_796_100_003_000)
    a2 = _stamped(assistant("Fixed.", id="a2"), 1_796_100_004_000)
    cp = _compaction("cp", "a2")
    line = [{**u2, "id": "U2", "parentId": "cp"}, {**a2, "id": "A2", "parentId": "U2"},
            {**cp, "id": "CP", "parentId": "A2"}, {**u2, "id": "U2b", "parentId": "CP"},
            {**a2, "id": "A2b", "parentId": "U2b"}, {**cp, "id": "CPb", "parentId": "A2b"}]
    after = _stamped(user("thanks", id="u3", parent="CPb"), 1_796_100_009_000)
    verdicts = run([header(), u1, a1, u2, a2, cp, *line, after])
    assert drops(verdicts) == {
        "U2": ("persisted_copy", "u2"),
        "A2": ("rewrite_copy", "a2"),
        "CP": ("rewrite_copy", "cp"),
        "U2b": ("persisted_copy", "u2"),
        "A2b": ("rewrite_copy", "a2"),
        "CPb": ("rewrite_copy", "cp"),
    }
    assert parents(verdicts)["u3"] == "cp"
    assert_valid_tree(verdicts)
    assert_clean_twice_is_clean(verdicts)


def test_compaction_clones_each_below_the_previous_are_dropped():
    u1 = _stamped(user("read the log", id="u1", parent=None), 1_796_100_001_000)
    cp = _compaction("cp", "u1", first_kept="u1")
    clones = [{**cp, "id": "cp2", "parentId": "cp"}, {**cp, "id": "cp3", "parentId": "cp2"}]
    after = _stamped(user("go on", id="u2", parent="cp3"), 1_796_100_009_000)
    verdicts = run([header(), u1, cp, *clones, after])
    assert drops(verdicts) == {"cp2": ("persisted_copy", "cp"), "cp3": ("persisted_copy", "cp")}
    assert parents(verdicts)["u2"] == "cp"
    assert_clean_twice_is_clean(verdicts)


@pytest.mark.parametrize("change", ["boundary", "tokens", "summary"])
def test_a_second_compaction_of_other_context_is_kept(change):
    """#127436: two genuine compactions may share a summary text; their boundary or count
    differs."""
    u1 = _stamped(user("read the log", id="u1", parent=None), 1_796_100_001_000)
    cp = _compaction("cp", "u1", first_kept="u1")
    second = {**cp, "id": "cp2", "parentId": "cp"}
    if change == "boundary":
        second["firstKeptEntryId"] = "cp"
    elif change == "tokens":
        second["tokensBefore"] = 1489
    else:
        second["summary"] = "Earlier: the log had 4 errors."
    assert not drops(run([header(), u1, cp, second]))


def test_a_reply_persisted_twice_in_a_line_is_not_dropped_by_its_payload_alone():
    """Replies are not indexed by payload: two identical replies one below the other are two
    turns to OpenClaw's replay (the peer case), wherever they hang."""
    a = _stamped(assistant(TEXT, id="a"), 1_796_100_004_000)
    later = {**a, "id": "later", "parentId": "t"}
    verdicts = run([header(), user(), a, _stamped(user("again?", id="t"), 1_796_100_005_000),
                    later])
    assert not drops(verdicts)


# --- heartbeat re-commit (#143787): rule 3a ----------------------------------------------------

HEARTBEAT = (
    "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. If nothing needs "
    "attention, your ENTIRE response must be exactly NO_REPLY."
)


def _heartbeat():
    return user(HEARTBEAT, provenance={"kind": "internal_system", "sourceTool": "heartbeat"})


def _final(text: str, send: str):
    return mirror(text, idempotency_key=f"channel-final:{send}:0",
                  marker={"sourceMessageId": send}, api="openclaw-transcript")


def test_a_silent_heartbeat_turn_committing_the_previous_reply_again_drops_the_copy():
    reply = assistant(TEXT)
    silent = assistant("NO_REPLY")
    copy = _final(TEXT, "hb-send-1")
    verdicts = run([header(), user("What is on tomorrow?"), reply, _heartbeat(), silent, copy])
    assert drops(verdicts) == {copy["id"]: ("silent_turn_replay", reply["id"])}
    (alert,) = alerts(verdicts, "silent_turn_replay")
    assert alert.severity == "warning"
    assert_clean_twice_is_clean(verdicts)


def test_every_silent_heartbeat_that_commits_the_same_reply_again_is_dropped():
    reply = assistant(TEXT)
    copies = [_final(TEXT, f"hb-send-{n}") for n in range(3)]
    items = [header(), user("What is on tomorrow?"), reply]
    for copy in copies:
        items += [_heartbeat(), assistant("HEARTBEAT_OK"), copy]
    verdicts = run(items)
    assert drops(verdicts) == {c["id"]: ("silent_turn_replay", reply["id"]) for c in copies}


def test_the_delivered_mirror_of_the_previous_turn_is_what_a_heartbeat_copy_repeats():
    reply = assistant(TEXT)
    cache = custom()
    delivered = _final(TEXT, "tg-1")  # below a custom entry, naming no source: kept
    copy = _final(TEXT, "hb-send-1")
    verdicts = run([header(), user("What is on?"), reply, cache, delivered, _heartbeat(),
                    assistant("NO_REPLY"), copy])
    assert drops(verdicts) == {copy["id"]: ("silent_turn_replay", delivered["id"])}


@pytest.mark.parametrize(
    "case",
    ["alert-reply", "not-a-heartbeat", "tool-call", "media", "other-text", "before-silence"],
)
def test_heartbeat_near_misses_are_kept(case):
    reply = assistant(TEXT)
    opener = user(HEARTBEAT) if case == "not-a-heartbeat" else _heartbeat()
    answer = {
        "alert-reply": assistant("The build needs credentials before it can continue."),
        "tool-call": assistant("NO_REPLY", tool_calls=["c1"]),
    }.get(case, assistant("NO_REPLY"))
    copy = _final("Something else entirely." if case == "other-text" else TEXT, "hb-send-1")
    if case == "media":
        copy["message"]["openclawDelivery"] = {"mediaUrls": ["/tmp/report.pdf"]}
    turn = [copy, answer] if case == "before-silence" else [answer, copy]
    verdicts = run([header(), user("What is on?"), reply, opener, *turn])
    assert copy["id"] not in drops(verdicts)


# Heartbeat turns without provenance: OpenClaw's `isHeartbeatUserMessage` texts.

CONTEXT_9 = (
    "Follow the heartbeat monitor scratch context when provided. Recurring tasks are "
    "automations; create or change their schedules with the automations tool, not heartbeat "
    "scratch. Do not infer or repeat old tasks from prior chats."
)
PROMPT_9 = CONTEXT_9 + " If nothing needs attention, reply NO_REPLY."
PROMPT_5 = (
    "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or "
    "repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK."
)
TASKS = "Run the following periodic tasks (only those due based on their intervals):"
CONTEXT_5 = (
    "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or "
    "repeat old tasks from prior chats."
)
RESPOND = (
    "Use heartbeat_respond to report the wake outcome. Set notify=false when nothing needs the "
    "user's attention. Set notify=true with notificationText only when the user should be "
    "interrupted."
)


def _silent_turn(opener: dict, limits=None):
    reply = assistant(TEXT)
    copy = _final(TEXT, "hb-send-1")
    verdicts = run([header(), user("What is on tomorrow?"), reply, opener, assistant("NO_REPLY"),
                    copy], limits=limits)
    return verdicts, reply, copy


@pytest.mark.parametrize(
    "text",
    [
        "[OpenClaw heartbeat poll]",
        "[OpenClaw cron wake]",
        "[OpenClaw session event]",
        "  [OpenClaw exec completion]\n",
        "Delivery: to send a message, use the `message` tool.\n\n[OpenClaw heartbeat poll]",
        PROMPT_9,
        PROMPT_9 + "\n\nScratch: check the deploy queue.",
        PROMPT_9 + "\n\nUse heartbeat_respond to report the wake outcome.",
        PROMPT_5 + " Current time: 2026-05-12 08:00 UTC",
        TASKS + "\n- inbox (every 30m)\nAfter completing all due tasks, reply NO_REPLY.",
        TASKS + "\n- inbox\nAfter completing all due tasks, reply HEARTBEAT_OK.",
        f"{CONTEXT_9} {RESPOND}",
        f"{CONTEXT_5} {RESPOND}\n\nCurrent time: 2026-07-01 08:00 UTC",
        PROMPT_5 + "\nWhen reading HEARTBEAT.md, use workspace file /home/a/HEARTBEAT.md (exact "
        "case). Do not read docs/heartbeat.md.",
        PROMPT_5 + "\n\nIf the heartbeat_respond tool is available, call it to record the "
        "heartbeat outcome.",
    ],
    ids=["poll", "cron-wake", "session-event", "exec-completion", "delivery-hint", "prompt-9.6",
         "prompt-9.6-scratch", "prompt-9.6-response-tool", "prompt-5.12", "tasks-9.6",
         "tasks-5.12", "response-tool-8.1-9.3", "response-tool-5.7-7.35",
         "prompt-2.26-4.15-workspace-hint", "prompt-5.2-response-tool"],
)
def test_a_heartbeat_turn_known_by_its_text_replays_nothing(text):
    """Without `provenance`, a heartbeat user message is known as OpenClaw knows it, by its
    text: each release line's defaults since 2026.2 (docs/rules.md, "Heartbeats")."""
    verdicts, reply, copy = _silent_turn(user(text))
    assert drops(verdicts) == {copy["id"]: ("silent_turn_replay", reply["id"])}


def test_a_configured_heartbeat_prompt_given_to_the_worker_opens_a_heartbeat_turn():
    prompt = "Check the inbox and the calendar. Say NO_REPLY when nothing changed."
    opener = user(prompt + "\nCurrent time: 08:00")
    verdicts, reply, copy = _silent_turn(opener, Limits(heartbeat_prompt=prompt + "  "))
    assert drops(verdicts) == {copy["id"]: ("silent_turn_replay", reply["id"])}
    verdicts, _, _ = _silent_turn(user(prompt + "\nCurrent time: 08:00"))
    assert not drops(verdicts)


@pytest.mark.parametrize(
    "text",
    [
        "What does [OpenClaw heartbeat poll] mean in my transcript?",
        "[OpenClaw heartbeat poll] and also check the build",
        PROMPT_9 + " Also water the plants.",
        TASKS + "\n- inbox (every 30m)",
        "Please run: " + PROMPT_5,
        HEARTBEAT,
    ],
    ids=["quoted", "poll-with-more", "prompt-9.6-continued", "tasks-without-completion",
         "prompt-5.12-quoted", "other-release-prompt"],
)
def test_user_messages_that_only_look_like_a_heartbeat_are_kept(text):
    verdicts, _, copy = _silent_turn(user(text))
    assert copy["id"] not in drops(verdicts)


# --- a claude-cli turn written by two writers (#118185, #143106): rule 4a ----------------------


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


def test_the_cli_record_joining_the_streamed_replies_is_dropped():
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
def test_a_cli_record_that_is_not_the_join_of_the_turns_replies_is_kept(text):
    first, result, second = _streamed_turn()
    verdicts = run([header(), user("What is in config.yaml?"), first, result, second,
                    _cli_record(text)])
    assert not drops(verdicts)


def test_a_join_in_the_next_turn_or_by_another_writer_is_kept():
    first, result, second = _streamed_turn()
    joined = "Let me read the config file first.\n\nIt sets the port to 8080."
    later = [user("Say it all again, please."), _cli_record(joined)]
    model_reply = assistant(joined)  # a model that repeats itself: a reply, not a record
    verdicts = run([header(), user("What is in config.yaml?"), first, result, second,
                    model_reply, *later])
    assert not drops(verdicts)


def test_a_retried_cli_run_under_its_own_key_is_kept():
    """Two `cli-assistant:<runId>` records of one text are two runs; one without a key of its
    own after the first is the gap-fill copy (peer case cli-gap-fill)."""
    first = _cli_record(TEXT, "run-1")
    retried = _cli_record(TEXT, "run-2")
    gap_fill = assistant(TEXT, provider="claude-cli", model="opus", api="cli")
    verdicts = run([header(), user(), first, retried, gap_fill])
    assert drops(verdicts) == {gap_fill["id"]: ("cli_mirror_duplicate", retried["id"])}


# --- a Claude CLI re-import after a resume (#136251): rule 4b ---------------------------------


def _imported(text: str, **fields):
    return assistant(
        text, provider="claude-cli", model="claude-sonnet-5", stop_reason="end_turn",
        __openclaw={"importedFrom": "claude-cli", "cliSessionId": "cli-1",
                    "externalId": "0c6f7d52"},
        **fields,
    )


def test_an_import_repeating_the_committed_cli_reply_is_dropped():
    committed = _cli_record(TEXT)
    imported = _imported(TEXT)
    verdicts = run([header(), user(), committed, custom(), imported])
    assert drops(verdicts) == {imported["id"]: ("cli_reimport_duplicate", committed["id"])}
    (alert,) = alerts(verdicts, "cli_reimport_duplicate")
    assert alert.evidence["imported_from"] == "claude-cli"


def test_a_commit_after_its_import_is_the_cli_copy():
    imported = _imported(TEXT)
    committed = _cli_record(TEXT)
    verdicts = run([header(), user(), imported, committed])
    assert drops(verdicts) == {committed["id"]: ("cli_mirror_duplicate", imported["id"])}


@pytest.mark.parametrize("case", ["next-turn", "other-text", "after-a-model-reply", "tools"])
def test_import_near_misses_are_kept(case):
    reply = assistant(TEXT) if case == "after-a-model-reply" else _cli_record(TEXT)
    between = [user("And now?")] if case == "next-turn" else []
    text = "A different answer." if case == "other-text" else TEXT
    imported = _imported(text, tool_calls=["c9"] if case == "tools" else ())
    verdicts = run([header(), user(), reply, *between, imported])
    assert imported["id"] not in drops(verdicts)


# --- channel finals that name no source (#126090, #121643): detection 16 -----------------------


def test_a_channel_final_naming_no_source_below_its_reply_is_dropped():
    """#126090, #121643: before 2026.9.6 every Telegram turn wrote a channel final naming only
    its send, parented to the reply it delivered (`api: "cli"` replies too)."""
    for api in ("anthropic-messages", "cli"):
        reply = assistant(TEXT, api=api)
        final = _final(TEXT, "telegram-final:agent:main:main:t1:0")
        verdicts = run([header(), user(), reply, final])
        assert drops(verdicts) == {final["id"]: ("delivery_mirror_duplicate", reply["id"])}
        assert_clean_twice_is_clean(verdicts)


def test_a_second_channel_final_below_the_first_is_another_send_and_kept():
    """The first, below the reply, is its delivery; a second one below it is a send of its
    own (#126090's near miss). Cleaned, it hangs below the reply, where a second cleaning
    would take it for the first: the one place `clean` is not idempotent (docs/rules.md)."""
    reply = assistant(TEXT)
    first = _final(TEXT, "t1")
    second = _final(TEXT, "t2")
    verdicts = run([header(), user(), reply, first, second])
    assert drops(verdicts) == {first["id"]: ("delivery_mirror_duplicate", reply["id"])}
    (alert,) = alerts(verdicts, "uncorrelated_mirror_copy")
    assert (alert.entry_id, alert.related_entry_id) == (second["id"], reply["id"])


def test_a_channel_final_naming_no_source_elsewhere_is_kept_and_reported():
    reply = assistant(TEXT)
    cache = custom()
    final = _final(TEXT, "telegram-final:agent:main:main:t1:0")
    verdicts = run([header(), user(), reply, cache, final])
    assert not drops(verdicts)
    (alert,) = alerts(verdicts, "uncorrelated_mirror_copy")
    assert (alert.entry_id, alert.related_entry_id, alert.severity) == (
        final["id"], reply["id"], "info")


@pytest.mark.parametrize("case", ["named", "new-text", "media", "send-mirror", "identity"])
def test_uncorrelated_final_near_misses_raise_nothing(case):
    fields = {"__openclaw": {"mirrorIdentity": "run-1:assistant"}} if case == "identity" else {}
    reply = assistant(TEXT, **fields)
    if case == "named":
        final = mirror(TEXT, marker={"sourceAssistantMessageId": reply["id"]})
    elif case == "send-mirror":
        final = mirror(TEXT, idempotency_key="idem-1", api="openclaw-transcript")
    else:
        final = _final("Here is the chart." if case == "new-text" else TEXT, "tg-1")
    if case == "media":
        final["message"]["openclawDelivery"] = {"mediaUrls": ["/tmp/chart.png"]}
    cache = custom()
    final["parentId"] = cache["id"]
    verdicts = run([header(), user(), reply, cache, final])
    assert not alerts(verdicts, "uncorrelated_mirror_copy")


# --- the tree around side entries and leaf controls (#100360) ----------------------------------


def test_side_mirrors_and_leaf_controls_are_no_first_children():
    """A message-tool mirror written beside the branch, and the `leaf` that moves the branch
    back, take no entry's place: the next real entry below the reply is no fork."""
    reply = assistant(TEXT, tool_calls=["call_m1"])
    side = mirror("Here is the report.", kind="message-tool-source-reply",
                  entry_extra={"appendMode": "side"})
    leaf = entry("leaf", parent=side["id"], targetId=reply["id"], appendMode="side")
    result = tool_result("call_m1", parent=reply["id"])
    verdicts = run([header(), user(), reply, side, leaf, result])
    assert not alerts(verdicts, "branch_fork")
    assert not drops(verdicts)


def test_an_entry_moved_around_a_dropped_copy_is_no_fork():
    """#126090's placement: the mirror hangs below the reply beside the cache-ttl entry, the
    next user turn below the mirror. Dropping the mirror moves that turn below the reply."""
    reply = assistant(TEXT, __openclaw={"mirrorIdentity": "run-1:assistant"})
    ttl = custom(parent=reply["id"])
    final = _final(TEXT, "tg-1")
    final["parentId"] = reply["id"]
    nxt = user("thanks", parent=final["id"])
    verdicts = run([header(), user(), reply, ttl, final, nxt])
    assert drops(verdicts) == {final["id"]: ("delivery_mirror_duplicate", reply["id"])}
    assert parents(verdicts)[nxt["id"]] == reply["id"]
    assert not alerts(verdicts, "branch_fork")


def test_a_real_fork_is_still_reported():
    reply = assistant(TEXT)
    first = user("thanks")
    other = user("wait, one more thing", parent=reply["id"])
    verdicts = run([header(), user(), reply, first, other])
    (alert,) = alerts(verdicts, "branch_fork")
    assert alert.entry_id == other["id"]



# --- #72012: a release renders each submitted prompt again without its sender block ------------

_SENDER = (
    "Sender (untrusted metadata):\n```json\n{\n  \"label\": \"openclaw-control-ui\",\n"
    "  \"id\": \"openclaw-control-ui\"\n}\n```\n\n"
)
_WORDS = "[Sun 2026-04-26 16:48 GMT+8] if you see me say the same thing twice, reply 1"


def test_a_prompt_rendered_again_without_its_sender_block_is_the_same_message():
    """2026.4.24 wrote each prompt a second time, the same millisecond and words, its sender
    block left out, as a sibling of the first: the person sent it once."""
    first = _stamped(user(_SENDER + _WORDS, id="u1", parent="a0"), 1_777_193_287_000)
    reply = assistant("1", id="a1", parent="u1")
    again = _stamped(user(_WORDS, id="u1b", parent="a0"), 1_777_193_287_000)
    verdicts = run([header(), _stamped(assistant("Hi!", id="a0", parent=None), 1), first,
                    reply, again])
    assert drops(verdicts) == {"u1b": ("persisted_copy", "u1")}
    assert_valid_tree(verdicts)


@pytest.mark.parametrize("near", ["another millisecond", "other words", "no millisecond"])
def test_the_same_words_are_another_message_without_the_same_millisecond(near):
    first = _stamped(user(_SENDER + _WORDS, id="u1", parent=None), 1_777_193_287_000)
    again = _stamped(user(_WORDS, id="u2", parent="a1"), 1_777_193_287_000)
    if near == "another millisecond":
        again["message"]["timestamp"] = 1_777_193_290_000
    elif near == "other words":
        again["message"]["content"] = [{"type": "text", "text": _WORDS + "!"}]
    else:
        del first["message"]["timestamp"], again["message"]["timestamp"]
    verdicts = run([header(), first, assistant("1", id="a1", parent="u1"), again])
    assert not drops(verdicts)
