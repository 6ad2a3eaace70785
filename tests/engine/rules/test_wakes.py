"""A completion wake answered with the answer already given (rules/wakes): `repeated_answer` and
its near misses."""

from __future__ import annotations

import pytest

from stream.engine import (
    Action,
    Severity,
)
from tests.support.builders import (
    alerts,
    assistant,
    drops,
    header,
    kept_ids,
    run,
    user,
)

ANSWER = "Both repositories pass their tests; the release branch is ready to tag."


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


# --- #156070: a Codex-native completion wake repeats the final answer: `repeated_answer` ----------

def test_156070_a_completion_wake_whose_reply_repeats_the_final_answer_is_kept_and_reported():
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
def test_156070_completion_wake_near_misses_raise_nothing(case):
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
