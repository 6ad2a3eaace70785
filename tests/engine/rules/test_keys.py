"""The same input delivered twice, by its idempotency key (rules/keys): `idempotent_replay`,
`announce_retry_duplicate`, `codex_prompt_mirror`, `idempotency_key_collision` and
`positional_idempotency_key`, on the shapes OpenClaw users reported and their near misses."""

from __future__ import annotations

import pytest

from stream.engine import (
    Action,
    Severity,
)
from tests.support.builders import (
    alert_kinds,
    alerts,
    assert_clean_twice_is_clean,
    assert_valid_tree,
    assistant,
    drops,
    entry,
    header,
    kept_ids,
    new_id,
    outputs,
    parents,
    run,
    tool_result,
    user,
    zero_usage,
)
from tests.support.rule_tests import (
    AGENDA,
    TEXT,
    aborted_reply,
    check_drop,
    stamped_with_response,
)

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


LOOP_ERROR = "Session transcript keyed user is outside the current turn: 0af3c1"


def _error_pair(i: int, key: str | None, text: str = "Run the weekly report."):
    prompt = stamped_with_response(user(text, idempotency_key=key), 1789067760000)
    failure = stamped_with_response(
        assistant(
            content=[{"type": "text", "text": ""}],
            error=LOOP_ERROR,
            usage=zero_usage(),
            idempotency_key=key,
        ),
        1789067761489 + i,
    )
    return prompt, failure


def _send(text: str):
    call = "call_" + new_id()
    reply = assistant(
        content=[
            {
                "type": "toolCall",
                "id": call,
                "name": "message",
                "arguments": {"action": "send", "text": text},
            }
        ],
        stop_reason="toolUse",
    )
    return [reply, tool_result(call, '{"ok":true,"messageId":"1718"}'), assistant("NO_REPLY")]


PROMPT = "Summarise the open pull requests."


def _http_row(
    key: str = "chatcmpl-9f1:user", text: str = PROMPT, at: int = 1789100000000
) -> dict:
    """The HTTP `/v1/chat/completions` user row: its key only under `__openclaw`."""
    return stamped_with_response(user(text, __openclaw={"idempotencyKey": key}), at)


def _codex_row(turn: str = "turn-1", text: str = PROMPT, at: int = 1789100000040) -> dict:
    """The Codex mirror's prompt row (`mirrorPromptAtTurnStartBestEffort`): the prepared user
    message with the sender facts, tagged `<turnId>:prompt` and keyed under the thread's scope."""
    return stamped_with_response(
        user(
            text,
            idempotency_key=f"codex-app-server:thr-42:{turn}:prompt",
            sourceChannel="openai-http",
            __openclaw={"mirrorIdentity": f"{turn}:prompt"},
        ),
        at,
    )


# --- `idempotent_replay` --------------------------------------------------------------------------

def test_idempotent_replay_drops_a_message_with_a_seen_key_and_content():
    first = user("send it", idempotency_key="msg-7f3a")
    replay = user("send it", idempotency_key="msg-7f3a")
    verdicts = run([header(), first, assistant(TEXT), replay])
    alert = check_drop(
        verdicts[3],
        kind="idempotent_replay",
        severity=Severity.INFO,
        entry_id=replay["id"],
        related=first["id"],
        line=4,
    )
    assert alert.evidence["idempotency_key"] == "msg-7f3a"
    assert alert.evidence["positional"] is False


def test_legacy_openclaw_idempotency_key_counts_too():
    first = user("send it", __openclaw={"idempotencyKey": "legacy-1"})
    replay = user("send it", __openclaw={"idempotencyKey": "legacy-1"})
    verdicts = run([header(), first, replay])
    assert drops(verdicts) == {replay["id"]: ("idempotent_replay", first["id"])}


def test_same_key_with_different_content_is_kept_with_a_collision_alert():
    first = user("send it", idempotency_key="msg-7f3a")
    other = user("no, wait, send the other one", idempotency_key="msg-7f3a")
    verdicts = run([header(), first, other])
    assert kept_ids(verdicts) == ["s1", first["id"], other["id"]]
    (collision,) = alerts(verdicts, "idempotency_key_collision")
    assert collision.severity is Severity.WARNING
    assert collision.action is Action.KEPT
    assert collision.entry_id == other["id"]
    assert collision.related_entry_id == first["id"]


def test_idempotency_fingerprint_ignores_ids_and_timestamps_but_not_role():
    """An assistant under a user's key is looked up among assistants, as OpenClaw's
    `scan-assistant` lookup does (a run's reply may carry its user turn's key): neither a
    replay of the user message nor a reuse of its key."""
    first = user("ok", idempotency_key="k1")
    same = user("ok", idempotency_key="k1")
    same["timestamp"] = "2027-01-01T00:00:00.000Z"
    as_assistant = assistant(content=first["message"]["content"], idempotency_key="k1")
    verdicts = run([header(), first, same, as_assistant])
    assert drops(verdicts) == {same["id"]: ("idempotent_replay", first["id"])}
    assert as_assistant["id"] in kept_ids(verdicts)
    assert not alerts(verdicts, "idempotency_key_collision")


def test_positional_keys_identify_by_scope_role_and_content():
    scope = "agent:main:whatsapp:run-5"
    u = user("summarize my inbox", idempotency_key=f"{scope}:user:0")
    a = assistant("3 new mails, none urgent.", idempotency_key=f"{scope}:assistant:1")
    # the same turn mirrored again after its snapshot shifted by one record
    u2 = user("summarize my inbox", idempotency_key=f"{scope}:user:0")
    a2 = assistant("3 new mails, none urgent.", idempotency_key=f"{scope}:assistant:2")
    verdicts = run([header(), u, a, u2, a2])
    assert drops(verdicts) == {
        u2["id"]: ("idempotent_replay", u["id"]),
        a2["id"]: ("idempotent_replay", a["id"]),
    }
    assert verdicts[4].alerts[-1].evidence == {
        "idempotency_key": f"{scope}:assistant:2",
        "positional": True,
    }
    (positional,) = alerts(verdicts, "positional_idempotency_key")
    assert positional.severity is Severity.INFO
    assert (positional.entry_id, positional.related_entry_id) == (None, u["id"])
    assert not alerts(verdicts, "idempotency_key_collision")


@pytest.mark.parametrize(
    ("second_key", "second_role"),
    [
        ("agent:main:run-6:user:0", "user"),  # another scope
        ("agent:main:run-5:assistant:0", "assistant"),  # another role
    ],
)
def test_positional_identity_differs_by_scope_or_role(second_key, second_role):
    first = user("yes", idempotency_key="agent:main:run-5:user:0")
    content = [{"type": "text", "text": "yes"}]
    if second_role == "user":
        second = user("yes", idempotency_key=second_key)
    else:
        second = assistant(content=content, idempotency_key=second_key)
    verdicts = run([header(), first, second])
    assert kept_ids(verdicts) == ["s1", first["id"], second["id"]]
    assert not alerts(verdicts, "idempotency_key_collision")


def test_reused_positional_key_with_new_content_is_kept_and_alerted():
    scope = "agent:main:run-5"
    a = assistant("first answer", idempotency_key=f"{scope}:assistant:1")
    b = assistant("the reasoning record", thinking="hmm", idempotency_key=f"{scope}:assistant:1")
    verdicts = run([header(), user(idempotency_key=f"{scope}:user:0"), a, b])
    assert verdicts[3].action is Action.KEPT
    (collision,) = alerts(verdicts, "idempotency_key_collision")
    assert (collision.entry_id, collision.related_entry_id) == (b["id"], a["id"])
    assert collision.evidence["positional"] is True


def test_positional_key_alert_is_raised_once_per_session():
    items = [header()]
    for n in range(4):
        items += [
            user(f"question {n}", idempotency_key=f"run-{n}:user:0"),
            assistant(f"answer number {n}", idempotency_key=f"run-{n}:assistant:1"),
        ]
    assert alert_kinds(run(items)).count("positional_idempotency_key") == 1
    assert alert_kinds(run(items, "s2")).count("positional_idempotency_key") == 1
    uuid_keys = [header(), user(idempotency_key="b02f2c54-f7d0-4bf2-943d-c17549b22947")]
    assert "positional_idempotency_key" not in alert_kinds(run(uuid_keys))


def test_redelivery_is_named_before_idempotent_replay():
    first = user("send it", idempotency_key="k1")
    verdicts = run([header(), first, first])
    assert drops(verdicts) == {first["id"]: ("redelivery", first["id"])}


# --- re-parenting --------------------------------------------------------------------------------

def test_a_dropped_message_leaves_its_idempotency_key_unused():
    """Found by hypothesis: a child dropped by `cleaned_child_duplicate` had moved key k1 to its
    own content, so a later reply with k1 was kept beside a collision alert in the first cleaning
    and dropped as a replay in the second. A dropped entry leaves no trace, and gets one alert."""
    raw = assistant("Hello there, friend.", thinking="thought", idempotency_key="k1")
    child = assistant("Hello there, friend.", parent=raw["id"], idempotency_key="k1",
                      usage=raw["message"]["usage"])
    again = assistant("Hello there, friend.", thinking="thought", idempotency_key="k1",
                      parent=child["id"], usage=raw["message"]["usage"])
    first = run([header(), user(parent=None), raw, child, again])
    assert drops(first) == {child["id"]: ("cleaned_child_duplicate", raw["id"]),
                            again["id"]: ("idempotent_replay", raw["id"])}
    assert [a.kind for a in alerts(first) if a.entry_id == child["id"]] == [
        "cleaned_child_duplicate"]
    second = run(outputs(first))
    assert not drops(second)


# --- inbound user turn written twice (#115389, #116409, #126680): `idempotent_replay` ------------

def test_115389_a_sibling_copy_of_the_user_turn_is_dropped_and_its_reply_hangs_below_the_original():
    """Two writers enrol one inbound: the copy (same key, same content, another id) is a
    sibling of the original, and the model answered below the copy. The reply must stay on
    the branch of the user's question, so it moves to the original, not to their parent."""
    a0 = assistant("Hi! How can I help?")
    original = user(AGENDA, idempotency_key="EF5ADAB8:user")
    copy = user(AGENDA, idempotency_key="EF5ADAB8:user", parent=a0["id"])
    reply = assistant("You have two meetings.", parent=copy["id"])
    verdicts = run([header(), user("hi"), a0, original, copy, reply])
    assert drops(verdicts) == {copy["id"]: ("idempotent_replay", original["id"])}
    assert parents(verdicts)[reply["id"]] == original["id"]
    assert not alerts(verdicts, "branch_fork")
    assert_valid_tree(verdicts)
    assert_clean_twice_is_clean(verdicts)


def test_126680_a_second_delivery_after_the_first_reply_keeps_both_replies_below_the_original():
    """#126680: the copy came after the first reply and got its own model call: both replies
    are real, and the second answers the same input, so it moves below the original."""
    original = user(AGENDA, idempotency_key="k:user")
    first = assistant("You have two meetings.")
    copy = user(AGENDA, idempotency_key="k:user")
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
def test_126680_a_second_delivery_reply_with_the_first_text_and_zero_usage_is_kept(first):
    """The developers' note on #126680: the second delivery's reply repeats the first reply's
    text with a usage of zeros. With the user copy between them dropped it would look like
    the first reply's delivery receipt or cleaned child (`cleaned_child_duplicate`) or its echo
    (`mistagged_echo`), in this cleaning or the next; it answers the original, so it hangs there
    and is no copy."""
    original = user(AGENDA, idempotency_key="k:user")
    reply = first()
    copy = user(AGENDA, idempotency_key="k:user")
    second = assistant("You have two meetings.", usage=zero_usage())
    verdicts = run([header(), original, reply, copy, second])
    assert drops(verdicts) == {copy["id"]: ("idempotent_replay", original["id"])}
    assert parents(verdicts)[second["id"]] == original["id"]
    assert_valid_tree(verdicts)
    assert_clean_twice_is_clean(verdicts)


def test_126680_a_receipt_below_the_reply_to_a_second_delivery_is_still_dropped():
    """The near miss: below the second delivery's reply, its own receipt is a copy."""
    original = user(AGENDA, idempotency_key="k:user")
    copy = user(AGENDA, idempotency_key="k:user")
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
        lambda parent: user(AGENDA, idempotency_key="k2:user", parent=parent),
        lambda parent: user(AGENDA, parent=parent),
        lambda parent: user(AGENDA + " Thanks.", idempotency_key="k1:user", parent=parent),
    ],
    ids=["other-key", "no-key", "other-text"],
)
def test_115389_a_user_sending_again_is_never_a_copy(second):
    a0 = assistant("Hi! How can I help?")
    first = user(AGENDA, idempotency_key="k1:user")
    again = second(a0["id"])
    verdicts = run([header(), user("hi"), a0, first, again, assistant("Sure.")])
    assert not drops(verdicts)


# --- idle-timeout retry (#95766): `idempotent_replay` ---------------------------------------------

def test_95766_a_keyed_retry_after_an_idle_timeout_is_dropped_and_the_retry_reply_kept():
    """Since the fix the harness moves back to the user's parent (a `leaf`) before the
    retry, so the replayed prompt is a sibling of the original: the reply moves to it."""
    a0 = assistant("Hi!")
    original = user(AGENDA, idempotency_key="run-7:user")
    aborted = aborted_reply()
    leaf = entry("leaf", targetId=a0["id"])
    again = user(AGENDA, idempotency_key="run-7:user", parent=a0["id"])
    reply = assistant("You have two meetings.")
    verdicts = run([header(), user("hi"), a0, original, aborted, leaf, again, reply])
    assert drops(verdicts) == {again["id"]: ("idempotent_replay", original["id"])}
    assert parents(verdicts)[reply["id"]] == original["id"]
    assert not alerts(verdicts, "retried_prompt")


# --- subagent announce / settle-wake retries (#121187, #153417): `announce_retry_duplicate` ------

def test_121187_a_retried_settle_wake_with_the_same_content_is_dropped():
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
def test_121187_wake_near_misses_are_kept(key, text):
    first = _wake(BASE) if not key.startswith("channel") else _wake("channel-final:m1:0")
    verdicts = run([header(), first, assistant("Done."), _wake(key, text)])
    assert not drops(verdicts)


def test_153417_the_user_turn_of_a_retried_settle_wake_is_dropped():
    """2026.9.6: the wake's key is the run id of the turn it starts, and the turn's user
    message is keyed `<runId>:user`, so a retry's ends `:retry-N:user`."""
    first = _wake(BASE + ":user")
    answer = assistant("The diagnostics finished.")
    retry = _wake(BASE + ":retry-1:user")
    verdicts = run([header(), user("run the diagnostics"), first, answer, retry,
                    assistant("NO_REPLY")])
    assert drops(verdicts) == {retry["id"]: ("announce_retry_duplicate", first["id"])}
    assert_clean_twice_is_clean(verdicts)


def test_153417_the_aborted_partial_of_a_retried_wake_run_is_dropped():
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
def test_153417_retried_wake_turn_near_misses_are_kept(first_key, retry_key, text):
    verdicts = run([header(), _wake(first_key), assistant("Done."), _wake(retry_key, text)])
    assert not drops(verdicts)


# --- #154253: terminal-error replays under one key: `idempotent_replay`, the key read per role ---

def test_154253_terminal_error_replays_under_one_key_are_dropped_once_per_role():
    """#154253: thousands of identical user + empty `stopReason:"error"` pairs, the run's key on
    both (OpenClaw looks an assistant's key up among assistants, `scan-assistant`, and the user
    row stays the key's owner). Each copy is the same input under the same key: dropped."""
    pairs = [_error_pair(i, "run-7f2:user") for i in range(4)]
    items = [header(), user("hi"), assistant("Hello!")]
    for pair in pairs:
        items.extend(pair)
    verdicts = run(items)
    (first_prompt, first_failure) = pairs[0]
    expected = {}
    for prompt, failure in pairs[1:]:
        expected[prompt["id"]] = ("idempotent_replay", first_prompt["id"])
        expected[failure["id"]] = ("idempotent_replay", first_failure["id"])
    assert drops(verdicts) == expected
    assert not alerts(verdicts, "idempotency_key_collision")
    assert kept_ids(verdicts)[-2:] == [first_prompt["id"], first_failure["id"]]
    assert_valid_tree(verdicts)
    assert_clean_twice_is_clean(verdicts)


def test_154253_a_user_and_its_reply_sharing_a_key_collide_with_nothing():
    """A run's reply carrying its user turn's key is no reuse of the key."""
    prompt = user("Run the weekly report.", idempotency_key="run-1:user")
    reply = assistant("Done: 14 rows.", idempotency_key="run-1:user")
    verdicts = run([header(), prompt, reply])
    assert kept_ids(verdicts)[1:] == [prompt["id"], reply["id"]]
    assert not alerts(verdicts, "idempotency_key_collision")


def test_154253_terminal_error_near_misses_are_kept():
    """Other words under the key are another input (a collision, kept); unkeyed prompts typed
    again are a person's, reported as retries; the failures themselves as a loop."""
    p1, f1 = _error_pair(0, "run-7f2:user")
    p2, f2 = _error_pair(1, "run-7f2:user", text="Run the monthly report instead.")
    verdicts = run([header(), p1, f1, p2, f2])
    assert p2["id"] in kept_ids(verdicts)
    (collision,) = alerts(verdicts, "idempotency_key_collision")
    assert collision.entry_id == p2["id"] and collision.related_entry_id == p1["id"]

    unkeyed = [_error_pair(i, None) for i in range(3)]
    for i, (prompt, _) in enumerate(unkeyed):
        prompt["message"]["timestamp"] += 60_000 * i  # typed again: a time of its own
    verdicts = run([header(), *(entry for pair in unkeyed for entry in pair)])
    assert not drops(verdicts)
    assert {a.entry_id for a in alerts(verdicts, "retried_prompt")} == {
        prompt["id"] for prompt, _ in unkeyed[1:]
    }
    assert [a.entry_id for a in alerts(verdicts, "error_loop")] == [unkeyed[2][1]["id"]]


# --- #149430: a fallback-tainted turn re-run for the same inbound: the sends kept -----------------

def test_149430_a_rerun_of_the_same_inbound_drops_the_user_copies_and_keeps_every_send():
    """#149430: each recovery retry re-admits the same inbound under its key and the model
    sends the answer again through the message tool. The user copies are the same input; the
    sends are real messages a user received, so every one is kept where it was written."""
    inbound = "Voice note: remind me to call the bank tomorrow at 9"
    first = user(inbound, idempotency_key="telegram:bot2:8812:msg-5521")
    items = [header(), first, *_send("Reminder set for 09:00 tomorrow.")]
    copies, sends = [], []
    for _ in range(3):
        again = user(inbound, idempotency_key="telegram:bot2:8812:msg-5521")
        turn = _send("Reminder set for 09:00 tomorrow.")
        copies.append(again)
        sends.append(turn[0])
        items.extend([again, *turn])
    verdicts = run(items)
    assert drops(verdicts) == {c["id"]: ("idempotent_replay", first["id"]) for c in copies}
    assert set(s["id"] for s in sends) <= set(kept_ids(verdicts))
    assert_valid_tree(verdicts)


def test_149430_the_same_inbound_words_without_its_key_are_a_new_message():
    inbound = "Voice note: remind me to call the bank tomorrow at 9"
    verdicts = run([header(), user(inbound), *_send("Set."), user(inbound), *_send("Set.")])
    assert not drops(verdicts)


# --- #141233: the Codex mirror writes the run's prompt again: `codex_prompt_mirror` ---------------

def test_141233_the_codex_mirror_of_the_prompt_is_dropped_and_the_reply_hangs_below_the_original():
    http = _http_row()
    codex = _codex_row()
    reply = assistant("Three PRs are open: ...")
    verdicts = run([header(), http, codex, reply])
    assert drops(verdicts) == {codex["id"]: ("codex_prompt_mirror", http["id"])}
    (alert,) = alerts(verdicts, "codex_prompt_mirror")
    assert alert.evidence["idempotency_key"] == "codex-app-server:thr-42:turn-1:prompt"
    assert parents(verdicts)[reply["id"]] == http["id"]
    assert_valid_tree(verdicts)
    assert_clean_twice_is_clean(verdicts)


def test_141233_the_http_row_written_after_the_codex_mirror_is_the_copy():
    codex = _codex_row()
    http = _http_row()
    reply = assistant("Three PRs are open: ...")
    verdicts = run([header(), codex, http, reply])
    assert drops(verdicts) == {http["id"]: ("codex_prompt_mirror", codex["id"])}
    assert parents(verdicts)[reply["id"]] == codex["id"]


def test_141233_every_run_keeps_one_prompt_when_a_person_sends_the_same_words_again():
    first = [_http_row("chatcmpl-1:user"), _codex_row("turn-1"), assistant("Three PRs.")]
    second = [
        _http_row("chatcmpl-2:user", at=1789100060000),
        _codex_row("turn-2", at=1789100060040),
        assistant("Still three."),
    ]
    verdicts = run([header(), *first, *second])
    assert drops(verdicts) == {
        first[1]["id"]: ("codex_prompt_mirror", first[0]["id"]),
        second[1]["id"]: ("codex_prompt_mirror", second[0]["id"]),
    }


def test_141233_the_same_words_through_the_codex_harness_after_the_answer_are_a_new_message():
    """A run through a channel has one prompt row, the mirror's; the same words after the HTTP
    run was answered, with no HTTP row of their own, are a person's new message."""
    http, answer = _http_row(), assistant("Three PRs are open: ...")
    later = _codex_row("turn-2")
    verdicts = run([header(), http, answer, later, assistant("Still three.")])
    assert not drops(verdicts)


@pytest.mark.parametrize("case", ["other words", "an unkeyed opener", "not a prompt identity"])
def test_141233_codex_prompt_near_misses_are_kept(case):
    http, codex = _http_row(), _codex_row()
    if case == "other words":
        codex = _codex_row(text="Summarise the closed pull requests.")
    elif case == "an unkeyed opener":
        http = stamped_with_response(user(PROMPT), 1789100000000)
    elif case == "not a prompt identity":
        codex["message"]["idempotencyKey"] = "codex-app-server:thr-42:turn-1:assistant"
    verdicts = run([header(), http, codex, assistant("Three PRs are open: ...")])
    assert not drops(verdicts)
