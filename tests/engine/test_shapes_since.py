"""The duplicate shapes OpenClaw users reported after the last round (#23 §2), each as its thread
and OpenClaw's writers show it, with the near misses a genuine second message makes. Each test
asserts what leaves the engine: which entries are kept, which dropped naming what, and which
alerts with which fields. The rows' shapes and the reasons for each decision are in
docs/rules.md (docs/reported-shapes.md points there)."""

from __future__ import annotations

import copy

import pytest

from stream.engine import Action, Severity
from tests.support.builders import (
    alerts,
    assert_clean_twice_is_clean,
    assert_valid_tree,
    assistant,
    dropped_ids,
    drops,
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

ANSWER = "Both repositories pass their tests; the release branch is ready to tag."


def stamped(item: dict, ms: int, response_id: str | None = None) -> dict:
    """The message stamped as OpenClaw stamps it: a numeric `message.timestamp`, and for a
    model reply the provider's `responseId`."""
    item["message"]["timestamp"] = ms
    if response_id is not None:
        item["message"]["responseId"] = response_id
    return item


def copied(item: dict, parent: str | None) -> dict:
    """The entry written again: a new id and parent, its `message` as it was."""
    twin = copy.deepcopy(item)
    twin["id"] = new_id()
    twin["parentId"] = parent
    twin["timestamp"] = "2026-04-05T04:22:31.112Z"
    return twin


# --- #156070: a codex-native completion wake repeats the final answer: detection -----------------

WAKE_KEY = "announce:codex-native:thr-main:thr-child-1:succeeded:user"
WAKE = (
    "[Internal task completion event]\nsource: codex-native\nstatus: succeeded\n"
    "Result: tests pass in both repositories."
)


def _wake(key: str | None = WAKE_KEY) -> dict:
    return user(
        WAKE,
        idempotency_key=key,
        provenance={"kind": "inter_session", "sourceTool": "subagent_announce"},
    )


def _answered_then_woken(second_text: str, wake: dict | None = None):
    question = user("Check both repos and tell me if we can release.", idempotency_key="r1:user")
    answer = assistant(ANSWER)
    repeat = assistant(second_text)
    return [header(), question, answer, wake or _wake(), repeat], answer, repeat


def test_a_completion_wake_whose_reply_repeats_the_final_answer_is_kept_and_reported():
    """#156070: the parent already consumed the child's result (wait_agent) and answered; the
    completion callback then opens a turn of its own and the model says it all again. That
    reply is a model call billed on its own (a model may restate on purpose), so it is kept."""
    items, answer, repeat = _answered_then_woken(ANSWER)
    verdicts = run(items)
    assert not drops(verdicts)
    assert repeat["id"] in kept_ids(verdicts)
    (alert,) = alerts(verdicts, "repeated_answer")
    assert alert.action is Action.KEPT
    assert alert.severity is Severity.WARNING
    assert alert.entry_id == repeat["id"]
    assert alert.related_entry_id == answer["id"]
    assert alert.evidence["idempotency_key"] == WAKE_KEY


@pytest.mark.parametrize(
    "case",
    ["other words", "a person asks again", "an unkeyed wake", "another key family"],
)
def test_completion_wake_near_misses_raise_nothing(case):
    wake = None
    second = ANSWER
    if case == "other words":
        second = "Child finished too: nothing new beyond what I reported."
    elif case == "a person asks again":
        wake = user("Can you repeat that?")
    elif case == "an unkeyed wake":
        wake = _wake(key=None)
    elif case == "another key family":
        wake = _wake(key="cron:nightly-release-check:user")
    items, _, repeat = _answered_then_woken(second, wake)
    verdicts = run(items)
    assert not drops(verdicts)
    assert repeat["id"] in kept_ids(verdicts)
    assert not alerts(verdicts, "repeated_answer")


# --- #154253: terminal-error replays under one key: rule 2, the key read per role ----------------

LOOP_ERROR = "Session transcript keyed user is outside the current turn: 0af3c1"


def _error_pair(i: int, key: str | None, text: str = "Run the weekly report."):
    prompt = stamped(user(text, idempotency_key=key), 1789067760000)
    failure = stamped(
        assistant(
            content=[{"type": "text", "text": ""}],
            error=LOOP_ERROR,
            usage=zero_usage(),
            idempotency_key=key,
        ),
        1789067761489 + i,
    )
    return prompt, failure


def test_terminal_error_replays_under_one_key_are_dropped_once_per_role():
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


def test_a_user_and_its_reply_sharing_a_key_collide_with_nothing():
    """A run's reply carrying its user turn's key is no reuse of the key."""
    prompt = user("Run the weekly report.", idempotency_key="run-1:user")
    reply = assistant("Done: 14 rows.", idempotency_key="run-1:user")
    verdicts = run([header(), prompt, reply])
    assert kept_ids(verdicts)[1:] == [prompt["id"], reply["id"]]
    assert not alerts(verdicts, "idempotency_key_collision")


def test_terminal_error_near_misses_are_kept():
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


# --- #149430: a fallback-tainted turn re-run for the same inbound: rule 2, the sends kept --------


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


def test_a_rerun_of_the_same_inbound_drops_the_user_copies_and_keeps_every_send():
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


def test_the_same_inbound_words_without_its_key_are_a_new_message():
    inbound = "Voice note: remind me to call the bank tomorrow at 9"
    verdicts = run([header(), user(inbound), *_send("Set."), user(inbound), *_send("Set.")])
    assert not drops(verdicts)


# --- #141233: the Codex mirror writes the run's prompt again: keys, a run's two writers ---------

PROMPT = "Summarise the open pull requests."


def _http_row(
    key: str = "chatcmpl-9f1:user", text: str = PROMPT, at: int = 1789100000000
) -> dict:
    """The HTTP `/v1/chat/completions` user row: its key only under `__openclaw`."""
    return stamped(user(text, __openclaw={"idempotencyKey": key}), at)


def _codex_row(turn: str = "turn-1", text: str = PROMPT, at: int = 1789100000040) -> dict:
    """The Codex mirror's prompt row (`mirrorPromptAtTurnStartBestEffort`): the prepared user
    message with the sender facts, tagged `<turnId>:prompt` and keyed under the thread's scope."""
    return stamped(
        user(
            text,
            idempotency_key=f"codex-app-server:thr-42:{turn}:prompt",
            sourceChannel="openai-http",
            __openclaw={"mirrorIdentity": f"{turn}:prompt"},
        ),
        at,
    )


def test_the_codex_mirror_of_the_runs_prompt_is_dropped_and_the_reply_hangs_below_the_original():
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


def test_the_http_row_written_after_the_codex_mirror_is_the_copy():
    codex = _codex_row()
    http = _http_row()
    reply = assistant("Three PRs are open: ...")
    verdicts = run([header(), codex, http, reply])
    assert drops(verdicts) == {http["id"]: ("codex_prompt_mirror", codex["id"])}
    assert parents(verdicts)[reply["id"]] == codex["id"]


def test_every_run_keeps_one_prompt_when_a_person_sends_the_same_words_again():
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


def test_the_same_words_through_the_codex_harness_after_the_answer_are_a_new_message():
    """A run through a channel has one prompt row, the mirror's; the same words after the HTTP
    run was answered, with no HTTP row of their own, are a person's new message."""
    http, answer = _http_row(), assistant("Three PRs are open: ...")
    later = _codex_row("turn-2")
    verdicts = run([header(), http, answer, later, assistant("Still three.")])
    assert not drops(verdicts)


@pytest.mark.parametrize("case", ["other words", "an unkeyed opener", "not a prompt identity"])
def test_codex_prompt_near_misses_are_kept(case):
    http, codex = _http_row(), _codex_row()
    if case == "other words":
        codex = _codex_row(text="Summarise the closed pull requests.")
    elif case == "an unkeyed opener":
        http = stamped(user(PROMPT), 1789100000000)
    elif case == "not a prompt identity":
        codex["message"]["idempotencyKey"] = "codex-app-server:thr-42:turn-1:assistant"
    verdicts = run([header(), http, codex, assistant("Three PRs are open: ...")])
    assert not drops(verdicts)


# --- #134705: openclawStreamFallback rows of one message: rule 1's conflict, both kept -----------


def test_a_stream_fallback_row_and_its_message_share_an_id_and_both_are_kept():
    """#134705: a non-streaming channel's reply of text + tool calls comes as two rows with one
    message id, responseId and timestamp: the text alone with `openclawStreamFallback`, and the
    thinking and tool calls with the text stripped (OpenClaw's display projection splits one
    stored message so). Neither repeats the other: the text is only in the first."""
    narration = "Checking the deploy log first."
    message_id = new_id()
    question = user("deploy failed?")
    text_row = stamped(
        assistant(
            narration,
            id=message_id,
            parent=question["id"],
            openclawStreamFallback={
                "replacementText": narration,
                "source": "segment",
                "itemId": "commentary-0",
            },
            openclawDelivery={"textPhaseRequiresTerminal": True},
        ),
        1789200000000,
        "resp_77",
    )
    calls_row = stamped(
        assistant(
            thinking="Look at the log.",
            tool_calls=["call_1"],
            id=message_id,
            parent=question["id"],
            usage=text_row["message"]["usage"],
            openclawDelivery={"textPhaseRequiresTerminal": True},
        ),
        1789200000000,
        "resp_77",
    )
    empty_row = stamped(
        assistant(
            "",
            id=message_id,
            parent=question["id"],
            openclawStreamFallback={
                "replacementText": "",
                "source": "segment",
                "itemId": "commentary-1",
            },
        ),
        1789200000000,
        "resp_77",
    )
    verdicts = run(
        [header(), question, text_row, calls_row, empty_row, tool_result("call_1", "exit 0")]
    )
    assert not drops(verdicts)
    assert kept_ids(verdicts).count(message_id) == 3
    conflicts = alerts(verdicts, "entry_id_conflict")
    assert [a.entry_id for a in conflicts] == [message_id, message_id]
    assert all(a.severity is Severity.WARNING and a.action is Action.KEPT for a in conflicts)
    # the narration twice, in its text and its replacementText, and nowhere else
    assert sum(line.count(narration.encode()) for line in outputs(verdicts)) == 2


# --- #85937: a reply persisted twice, the copy parented to it: payload ---------------------------


def _gemini_reply() -> dict:
    return stamped(
        assistant(
            "It will be sunny, 24°C.",
            provider="google",
            model="gemini-3.5-flash",
            api="google-generative-ai",
        ),
        1789300000000,
        "resp_gm_1",
    )


def test_a_reply_persisted_twice_below_itself_is_dropped():
    """#85937: every Gemini streamed reply was written again 1.5-3 s later, parented to the
    first: the same message (its bytes, numeric timestamp and responseId) persisted twice."""
    reply = _gemini_reply()
    twin = copied(reply, reply["id"])
    after = user("and tomorrow?")
    verdicts = run([header(), user("weather?"), reply, twin, after])
    assert drops(verdicts) == {twin["id"]: ("same_response", reply["id"])}
    (alert,) = alerts(verdicts, "same_response")
    assert alert.severity is Severity.INFO
    assert parents(verdicts)[after["id"]] == reply["id"]
    assert not alerts(verdicts, "consecutive_assistant")
    assert_valid_tree(verdicts)
    assert_clean_twice_is_clean(verdicts)


@pytest.mark.parametrize("change", ["another timestamp", "unstamped"])
def test_a_reply_below_its_twin_stamped_anew_is_still_the_same_response(change):
    """The message's own timestamp is not what a copy keeps: the response id and the message
    without it say it is the same model call's reply."""
    reply = _gemini_reply()
    twin = copied(reply, reply["id"])
    if change == "another timestamp":
        twin["message"]["timestamp"] += 2100
    else:
        del reply["message"]["timestamp"], twin["message"]["timestamp"]
    verdicts = run([header(), user("weather?"), reply, twin])
    assert drops(verdicts) == {twin["id"]: ("same_response", reply["id"])}


def test_a_reply_below_its_twin_from_another_model_call_is_kept():
    reply = _gemini_reply()
    twin = copied(reply, reply["id"])
    twin["message"]["responseId"] = "resp_gm_2"
    verdicts = run([header(), user("weather?"), reply, twin])
    assert not drops(verdicts)
    assert alerts(verdicts, "consecutive_assistant")


# --- #83404: queued follow-ups re-appended by each fallback candidate: rule 15 -------------------

QUEUED = "[Queued messages while agent was busy]\n\n---\nQueued #1\nalso check the staging logs"


def test_queued_prompts_appended_again_by_each_fallback_candidate_are_kept_and_reported():
    """#83404 (2026.5.x): each fallback candidate persisted the queued prompt again, without a
    key and at its own time, with an error stub between. Nothing tells them from a person
    sending the words again: kept, each reported as a retried prompt of the first."""
    first = stamped(user(QUEUED), 1779100000000)
    items = [header(), user("deploy"), assistant("Deploying."), first]
    again = []
    for i in range(3):
        items.append(assistant(content=[], error="HTTP 500 from upstream", usage=zero_usage()))
        copy_ = stamped(user(QUEUED), 1779100001000 + i * 1000)
        again.append(copy_)
        items.append(copy_)
    verdicts = run(items)
    assert not drops(verdicts)
    reported = alerts(verdicts, "retried_prompt")
    assert [a.entry_id for a in reported] == [c["id"] for c in again]
    # each copy kept opens a turn of its own, which the next one retries
    retried = [first["id"], *(c["id"] for c in again[:-1])]
    assert [a.evidence["original_id"] for a in reported] == retried


# --- #73119: sessions_history writes every earlier message again as a branch: rule 2b ------------


def _conversation():
    u1 = stamped(user("What changed in v2?", parent=None), 1777300000000)
    a1 = stamped(assistant("The config moved to YAML."), 1777300001000, "resp_a1")
    u2 = stamped(user("And the CLI?"), 1777300002000)
    a2 = stamped(assistant("It gained a --dry-run flag."), 1777300003000, "resp_a2")
    return [u1, a1, u2, a2]


def _branch_of(originals, first_parent):
    out, parent = [], first_parent
    for item in originals:
        twin = copied(item, parent)
        out.append(twin)
        parent = twin["id"]
    return out


def test_a_history_read_that_writes_every_message_again_from_the_root_is_dropped():
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


def _copy_rule(original: dict) -> str:
    """A reply is known by its provider's response id; a user message by its place."""
    return "same_response" if "responseId" in original["message"] else "rewrite_copy"


def test_a_second_root_whose_messages_are_their_own_is_kept():
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


def test_a_second_root_with_a_message_of_its_own_is_the_rewritten_entry():
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


def _replay_at_the_root():
    """An imported session's first reply as its root, a turn, and that turn's reply replayed
    under its key as a new root (rule 2: dropped, what hangs below it goes to the root)."""
    root = stamped(assistant("Imported from the CLI.", parent=None), 1777300000000)
    ask = user("Go on.", parent=root["id"])
    reply = assistant("Done.", parent=ask["id"], idempotency_key="k1")
    return root, [root, ask, reply], copied(reply, None)


def test_a_copy_of_the_root_below_a_dropped_replay_is_dropped_on_the_first_clean():
    """Found by the property test: the root's copy, below a replay re-parented to the root,
    stands beside the root in the output, so rule 2b takes it now, not only when the output
    is cleaned again (where it is parentless)."""
    root, originals, replay = _replay_at_the_root()
    twin = copied(root, replay["id"])
    verdicts = run([header(), *originals, replay, twin])
    assert drops(verdicts) == {
        replay["id"]: ("idempotent_replay", originals[-1]["id"]),
        twin["id"]: ("rewrite_copy", root["id"]),
    }
    assert_clean_twice_is_clean(verdicts)


def test_a_reply_of_its_own_below_a_dropped_replay_is_kept_at_the_root():
    _, originals, replay = _replay_at_the_root()
    own = stamped(assistant("Imported from the CLI.", parent=replay["id"]), 1777300009000)
    verdicts = run([header(), *originals, replay, own])
    assert dropped_ids(verdicts) == [replay["id"]]
    assert parents(verdicts)[own["id"]] is None
    assert_clean_twice_is_clean(verdicts)


def test_a_queued_prompt_appended_again_byte_for_byte_is_the_same_message():
    """#83404 when a candidate re-persists the queued message as it was (its numeric timestamp
    too): the same message persisted twice, rule 2c's evidence, and the reply moves below it."""
    first = stamped(user(QUEUED), 1779100000000)
    stub = assistant(content=[], error="HTTP 500 from upstream", usage=zero_usage())
    again = copied(first, stub["id"])
    reply = assistant("Staging logs are clean.")
    verdicts = run([header(), user("deploy"), assistant("Deploying."), first, stub, again, reply])
    assert drops(verdicts) == {again["id"]: ("persisted_copy", first["id"])}
    assert parents(verdicts)[reply["id"]] == first["id"]
    assert not alerts(verdicts, "retried_prompt")
    assert_valid_tree(verdicts)
