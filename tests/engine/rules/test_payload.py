"""The same message persisted twice, by its payload and where it hangs (rules/payload):
`rewrite_copy` and `persisted_copy`, on the rewrites OpenClaw users reported and their near
misses."""

from __future__ import annotations

import pytest

from tests.support.builders import (
    alerts,
    assert_clean_twice_is_clean,
    assert_valid_tree,
    assistant,
    custom,
    dropped_ids,
    drops,
    encode,
    entry,
    header,
    kept,
    parents,
    run,
    tool_result,
    user,
    zero_usage,
)
from tests.support.rule_tests import AGENDA, QUEUED, aborted_reply, copied, stamped_with_response


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


def _payload(item: dict) -> int:
    from stream.engine.entry import parse

    return parse(encode([item])[0]).payload


def _compaction(id: str, parent: str, first_kept: str = "u2", tokens: int = 91234) -> dict:
    return entry("compaction", id=id, parent=parent, summary="Earlier: the log had 3 errors.",
                 firstKeptEntryId=first_kept, tokensBefore=tokens)


def _conversation():
    u1 = stamped_with_response(user("What changed in v2?", parent=None), 1777300000000)
    a1 = stamped_with_response(assistant("The config moved to YAML."), 1777300001000, "resp_a1")
    u2 = stamped_with_response(user("And the CLI?"), 1777300002000)
    a2 = stamped_with_response(assistant("It gained a --dry-run flag."), 1777300003000, "resp_a2")
    return [u1, a1, u2, a2]


def _branch_of(originals, first_parent):
    out, parent = [], first_parent
    for item in originals:
        twin = copied(item, parent)
        out.append(twin)
        parent = twin["id"]
    return out


def _copy_rule(original: dict) -> str:
    """A reply is known by its provider's response id; a user message by its place."""
    return "same_response" if "responseId" in original["message"] else "rewrite_copy"


def _replay_at_the_root():
    """An imported session's first reply as its root, a turn, and that turn's reply replayed
    under its key as a new root (`idempotent_replay`: dropped, what hangs below it goes to the
    root)."""
    root = stamped_with_response(assistant("Imported from the CLI.", parent=None), 1777300000000)
    ask = user("Go on.", parent=root["id"])
    reply = assistant("Done.", parent=ask["id"], idempotency_key="k1")
    return root, [root, ask, reply], copied(reply, None)


# --- overflow-recovery and compaction rewrites (#89387, #115310): `rewrite_copy` -----------------

@pytest.mark.parametrize("era", ["jsonl", "sqlite"])
def test_89387_a_rewrite_branch_drops_its_copies_and_keeps_the_new_entry(era):
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


def test_89387_a_copied_unkeyed_user_message_is_a_rewrite_copy_too():
    originals = _session_with_a_large_result()
    del originals[5]["message"]["idempotencyKey"]
    replacement, copies = _recovery(originals)
    verdicts = run([header(), *originals, replacement, *copies])
    assert drops(verdicts)["U2"] == ("rewrite_copy", "u2")


def test_89387_a_compaction_copied_by_a_rewrite_is_dropped():
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


def test_89387_identical_turns_one_below_the_other_are_two_turns():
    """Replay-history keeps two adjacent identical replies: the second hangs below the first,
    not where a copy of the first would."""
    a = _stamped(assistant(AGENDA, id="a"), 1_796_100_004_000)
    twin = {**a, "id": "twin", "parentId": "a"}
    assert not drops(run([header(), user(), a, twin]))


@pytest.mark.parametrize("change", ["usage", "unstamped", "elsewhere", "regenerated"])
def test_89387_rewrite_near_misses_are_kept(change):
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


# --- the same message persisted again (#95766, #128472, #66443, #72511): `persisted_copy` --------

def test_128472_a_prompt_replayed_byte_for_byte_after_an_idle_timeout_is_dropped():
    """#128472: an unkeyed prompt, an empty aborted reply, then the same `message` again, its
    numeric timestamp included: the same message persisted twice. The reply to the replay
    answers the original."""
    original = _stamped(user(AGENDA), 1_796_200_001_000)
    aborted = _stamped(aborted_reply(error="LLM idle timeout (60s): no response from model"),
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


def test_95766_the_same_words_typed_again_after_an_idle_timeout_are_kept_and_reported():
    """A person sending the prompt again: a new timestamp, so another message."""
    original = _stamped(user(AGENDA), 1_796_200_001_000)
    again = _stamped(user(AGENDA), 1_796_200_090_000)
    verdicts = run([header(), original, aborted_reply(), again, assistant("Two meetings.")])
    assert not drops(verdicts)
    (alert,) = alerts(verdicts, "retried_prompt")
    assert alert.related_entry_id == original["id"]


def test_66443_a_line_of_copies_after_a_compaction_is_dropped():
    """#66443, #72511: after a compaction the same user turns and compactions are appended
    again, each below the previous copy, only the ids new. The first user copy is the same
    message persisted again; what follows it stands beside its original (`rewrite_copy`)."""
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


def test_72511_compaction_clones_each_below_the_previous_are_dropped():
    u1 = _stamped(user("read the log", id="u1", parent=None), 1_796_100_001_000)
    cp = _compaction("cp", "u1", first_kept="u1")
    clones = [{**cp, "id": "cp2", "parentId": "cp"}, {**cp, "id": "cp3", "parentId": "cp2"}]
    after = _stamped(user("go on", id="u2", parent="cp3"), 1_796_100_009_000)
    verdicts = run([header(), u1, cp, *clones, after])
    assert drops(verdicts) == {"cp2": ("persisted_copy", "cp"), "cp3": ("persisted_copy", "cp")}
    assert parents(verdicts)["u2"] == "cp"
    assert_clean_twice_is_clean(verdicts)


@pytest.mark.parametrize("change", ["boundary", "tokens", "summary"])
def test_72511_a_second_compaction_of_other_context_is_kept(change):
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


def test_66443_a_reply_persisted_twice_in_a_line_is_not_dropped_by_its_payload_alone():
    """Replies are not indexed by payload: two identical replies one below the other are two
    turns to OpenClaw's replay (the peer case), wherever they hang."""
    a = _stamped(assistant(AGENDA, id="a"), 1_796_100_004_000)
    later = {**a, "id": "later", "parentId": "t"}
    verdicts = run([header(), user(), a, _stamped(user("again?", id="t"), 1_796_100_005_000),
                    later])
    assert not drops(verdicts)


# --- #72012: a release renders each submitted prompt again without its sender block ------------

_SENDER = (
    "Sender (untrusted metadata):\n```json\n{\n  \"label\": \"openclaw-control-ui\",\n"
    "  \"id\": \"openclaw-control-ui\"\n}\n```\n\n"
)
_WORDS = "[Sun 2026-04-26 16:48 GMT+8] if you see me say the same thing twice, reply 1"


def test_72012_a_prompt_rendered_again_without_its_sender_block_is_the_same_message():
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
def test_72012_the_same_words_are_another_message_without_the_same_millisecond(near):
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


# --- #73119: sessions_history writes every earlier message again as a branch: `rewrite_copy` -----

def test_73119_a_history_read_that_writes_every_message_again_from_the_root_is_dropped():
    """#73119: a copy of every prior message as a new branch from the session's root: fresh
    ids, each message byte for byte with its `responseId`. The copies stand beside their
    originals, as a rewrite's do; a turn appended on the new branch moves to the originals."""
    originals = _conversation()
    branch = _branch_of(originals, None)
    follow = user("Thanks!", parent=branch[-1]["id"])
    verdicts = run([header(), *originals, *branch, follow])
    assert drops(verdicts) == {
        twin["id"]: (_copy_rule(original), original["id"])
        for twin, original in zip(branch, originals, strict=True)
    }
    assert parents(verdicts)[follow["id"]] == originals[-1]["id"]
    assert_valid_tree(verdicts)
    assert_clean_twice_is_clean(verdicts)


def test_73119_a_second_root_whose_messages_are_their_own_is_kept():
    """The same words again from a new root, each message with a time of its own and each
    reply from a model call of its own (a session started over): nothing is a copy."""
    originals = _conversation()
    branch = _branch_of(originals, None)
    for twin in branch:
        twin["message"]["timestamp"] += 86_400_000
        if "responseId" in twin["message"]:
            twin["message"]["responseId"] += "-again"
    verdicts = run([header(), *originals, *branch])
    assert not drops(verdicts)


def test_73119_a_second_root_with_a_message_of_its_own_is_the_rewritten_entry():
    """A new root with another message, then copies below it: the root is kept beside the
    first (as a rewrite's edited entry is), the copies below it are the rewrite's."""
    originals = _conversation()
    branch = _branch_of(originals, None)
    branch[0]["message"]["content"][0]["text"] = "What changed in v2.1?"
    verdicts = run([header(), *originals, *branch])
    assert drops(verdicts) == {
        twin["id"]: (_copy_rule(original), original["id"])
        for twin, original in zip(branch[1:], originals[1:], strict=True)
    }


def test_73119_a_copy_of_the_root_below_a_dropped_replay_is_dropped_on_the_first_clean():
    """Found by the property test: the root's copy, below a replay re-parented to the root,
    stands beside the root in the output, so `rewrite_copy` takes it now, not only when the output
    is cleaned again (where it is parentless)."""
    root, originals, replay = _replay_at_the_root()
    twin = copied(root, replay["id"])
    verdicts = run([header(), *originals, replay, twin])
    assert drops(verdicts) == {
        replay["id"]: ("idempotent_replay", originals[-1]["id"]),
        twin["id"]: ("rewrite_copy", root["id"]),
    }
    assert_clean_twice_is_clean(verdicts)


def test_73119_a_reply_of_its_own_below_a_dropped_replay_is_kept_at_the_root():
    _, originals, replay = _replay_at_the_root()
    own = stamped_with_response(assistant("Imported from the CLI.", parent=replay["id"]),
                                1777300009000)
    verdicts = run([header(), *originals, replay, own])
    assert dropped_ids(verdicts) == [replay["id"]]
    assert parents(verdicts)[own["id"]] is None
    assert_clean_twice_is_clean(verdicts)


# --- #83404: a queued prompt a fallback candidate persists again as it was: `persisted_copy` ------


def test_83404_a_queued_prompt_appended_again_byte_for_byte_is_the_same_message():
    """#83404 when a candidate re-persists the queued message as it was (its numeric timestamp
    too): the same message persisted twice, `persisted_copy`'s evidence, and the reply moves
    below it."""
    first = stamped_with_response(user(QUEUED), 1779100000000)
    stub = assistant(content=[], error="HTTP 500 from upstream", usage=zero_usage())
    again = copied(first, stub["id"])
    reply = assistant("Staging logs are clean.")
    verdicts = run([header(), user("deploy"), assistant("Deploying."), first, stub, again, reply])
    assert drops(verdicts) == {again["id"]: ("persisted_copy", first["id"])}
    assert parents(verdicts)[reply["id"]] == first["id"]
    assert not alerts(verdicts, "retried_prompt")
    assert_valid_tree(verdicts)
