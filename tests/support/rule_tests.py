"""What the engine's rule tests (tests/engine/rules/) share: sample texts, the entry shapes
OpenClaw writes that several rules meet, and the checks of a verdict's alert."""

from __future__ import annotations

import copy

from stream.engine import Action, FileOrigin
from tests.support.builders import alerts, assistant, mirror, new_id, zero_usage

TEXT = "Done. The report is in ~/reports/weekly.md and I emailed it to the team."
AGENDA = "Tomorrow you have a 10:00 standup and a 14:00 review."
QUEUED = "[Queued messages while agent was busy]\n\n---\nQueued #1\nalso check the staging logs"


def stamped_with_response(item: dict, ms: int, response_id: str | None = None) -> dict:
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


def channel_final(text: str, send: str):
    """A channel's final-reply mirror that names only its send."""
    return mirror(text, idempotency_key=f"channel-final:{send}:0",
                  marker={"sourceMessageId": send}, api="openclaw-transcript")


def aborted_reply(error: str = "LLM idle timeout (120s): no response from model", **fields):
    return assistant(content=[], usage=zero_usage(), stop_reason="aborted", error=error, **fields)


def cli_copy(text, **kw):
    return assistant(text, api="cli", provider="claude-cli", model="opus", **kw)


def only_drop_alert(verdict):
    assert verdict.action is Action.DROPPED
    (alert,) = verdict.alerts
    assert alert.action is Action.DROPPED
    assert alert.kind == verdict.drop_rule
    return alert


def check_drop(verdict, *, kind, severity, entry_id, related, line, session_id="s1"):
    alert = only_drop_alert(verdict)
    assert alert.kind == kind
    assert alert.severity is severity
    assert alert.entry_id == entry_id
    assert alert.related_entry_id == related
    assert alert.session_id == session_id
    assert alert.source == FileOrigin(f"{session_id}.jsonl", line)
    assert verdict.output is None
    assert verdict.dead_letter is None
    return alert


def the_alert(verdicts, kind):
    (alert,) = alerts(verdicts, kind)
    assert alert.action is Action.KEPT
    assert alert.session_id == "s1"
    return alert
