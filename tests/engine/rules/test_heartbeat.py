"""A heartbeat turn, as OpenClaw tells one (rules/heartbeat), and the reply it commits again:
`silent_turn_replay` and its near misses."""

from __future__ import annotations

import pytest

from stream.engine import (
    Limits,
)
from tests.support.builders import (
    alerts,
    assert_clean_twice_is_clean,
    assistant,
    custom,
    drops,
    header,
    run,
    user,
)
from tests.support.rule_tests import AGENDA, channel_final

HEARTBEAT = (
    "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. If nothing needs "
    "attention, your ENTIRE response must be exactly NO_REPLY."
)


def _heartbeat():
    return user(HEARTBEAT, provenance={"kind": "internal_system", "sourceTool": "heartbeat"})


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
    reply = assistant(AGENDA)
    copy = channel_final(AGENDA, "hb-send-1")
    verdicts = run([header(), user("What is on tomorrow?"), reply, opener, assistant("NO_REPLY"),
                    copy], limits=limits)
    return verdicts, reply, copy


# --- heartbeat re-commit (#143787): `silent_turn_replay` -----------------------------------------

def test_143787_a_silent_heartbeat_turn_committing_the_previous_reply_again_drops_the_copy():
    reply = assistant(AGENDA)
    silent = assistant("NO_REPLY")
    copy = channel_final(AGENDA, "hb-send-1")
    verdicts = run([header(), user("What is on tomorrow?"), reply, _heartbeat(), silent, copy])
    assert drops(verdicts) == {copy["id"]: ("silent_turn_replay", reply["id"])}
    (alert,) = alerts(verdicts, "silent_turn_replay")
    assert alert.severity == "warning"
    assert_clean_twice_is_clean(verdicts)


def test_143787_every_silent_heartbeat_that_commits_the_same_reply_again_is_dropped():
    reply = assistant(AGENDA)
    copies = [channel_final(AGENDA, f"hb-send-{n}") for n in range(3)]
    items = [header(), user("What is on tomorrow?"), reply]
    for copy in copies:
        items += [_heartbeat(), assistant("HEARTBEAT_OK"), copy]
    verdicts = run(items)
    assert drops(verdicts) == {c["id"]: ("silent_turn_replay", reply["id"]) for c in copies}


def test_143787_the_delivered_mirror_of_the_previous_turn_is_what_a_heartbeat_copy_repeats():
    reply = assistant(AGENDA)
    cache = custom()
    delivered = channel_final(AGENDA, "tg-1")  # below a custom entry, naming no source: kept
    copy = channel_final(AGENDA, "hb-send-1")
    verdicts = run([header(), user("What is on?"), reply, cache, delivered, _heartbeat(),
                    assistant("NO_REPLY"), copy])
    assert drops(verdicts) == {copy["id"]: ("silent_turn_replay", delivered["id"])}


@pytest.mark.parametrize(
    "case",
    ["alert-reply", "not-a-heartbeat", "tool-call", "media", "other-text", "before-silence"],
)
def test_143787_heartbeat_near_misses_are_kept(case):
    reply = assistant(AGENDA)
    opener = user(HEARTBEAT) if case == "not-a-heartbeat" else _heartbeat()
    answer = {
        "alert-reply": assistant("The build needs credentials before it can continue."),
        "tool-call": assistant("NO_REPLY", tool_calls=["c1"]),
    }.get(case, assistant("NO_REPLY"))
    text = "Something else entirely." if case == "other-text" else AGENDA
    copy = channel_final(text, "hb-send-1")
    if case == "media":
        copy["message"]["openclawDelivery"] = {"mediaUrls": ["/tmp/report.pdf"]}
    turn = [copy, answer] if case == "before-silence" else [answer, copy]
    verdicts = run([header(), user("What is on?"), reply, opener, *turn])
    assert copy["id"] not in drops(verdicts)


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
def test_143787_a_heartbeat_turn_known_by_its_text_replays_nothing(text):
    """Without `provenance`, a heartbeat user message is known as OpenClaw knows it, by its
    text: each release line's defaults since 2026.2 (docs/rules.md, "Heartbeats")."""
    verdicts, reply, copy = _silent_turn(user(text))
    assert drops(verdicts) == {copy["id"]: ("silent_turn_replay", reply["id"])}


def test_143787_a_configured_heartbeat_prompt_given_to_the_worker_opens_a_heartbeat_turn():
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
def test_143787_user_messages_that_only_look_like_a_heartbeat_are_kept(text):
    verdicts, _, copy = _silent_turn(user(text))
    assert copy["id"] not in drops(verdicts)
