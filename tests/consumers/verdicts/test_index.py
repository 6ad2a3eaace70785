"""What the verdict index answers, fed with the engine's own outputs for real copy shapes."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from stream.consumers.verdicts.index import RECENT_IDS, VerdictIndex
from stream.consumers.verdicts.records import read_alert, read_clean
from stream.engine import Verdict
from tests.support.builders import assistant, custom, header, mirror, run, user

SESSION = "s1"


def index_of(verdicts: Sequence[Verdict], index: VerdictIndex | None = None,
             at: float = 1000.0) -> VerdictIndex:
    """The index after the worker's outputs for `verdicts`, in the order it writes them."""
    index = index or VerdictIndex(max_ids=100, ttl=3600)
    for verdict in verdicts:
        for alert in verdict.alerts:
            assert read_alert(index, alert.to_bytes(), at)
        if verdict.output is not None:
            assert read_clean(index, SESSION.encode(), verdict.output, at)
    return index


def test_the_copies_the_engine_dropped_are_answered_with_the_reply_they_repeat() -> None:
    text = "The build is green and the flaky test is quarantined."
    question = user("status?", idempotency_key="run-1:user")
    reply = assistant(text, thinking="Check the pipeline.")
    ttl = custom("openclaw.cache-ttl")
    cli_copy = assistant(text, api="cli", usage=None)
    again = user("status?", idempotency_key="run-1:user")
    answer = assistant("Still green.", thinking="Same.")
    verdicts = run([header(), question, reply, ttl, cli_copy, again, answer])

    result = index_of(verdicts).answer(SESSION, answer["id"])

    assert result.processed
    assert result.dropped == {cli_copy["id"]: reply["id"], again["id"]: question["id"]}


def test_an_entry_not_processed_yet_is_not_taken_for_kept() -> None:
    reply = assistant("Done.", thinking="t")
    verdicts = run([header(), user("go"), reply])
    index = index_of(verdicts)

    later = index.answer(SESSION, "an-entry-the-worker-has-not-seen")
    unknown = index.answer("another-session", reply["id"])

    assert (later.processed, later.reason) == (False, "entry an-entry-the-worker-has-not-seen "
                                                      "not processed yet")
    assert (unknown.processed, unknown.reason) == (False, "no entry of the session processed yet")
    assert index.answer(SESSION, reply["id"]).processed


def test_the_last_message_counts_as_processed_after_the_entries_openclaw_writes_behind_it() -> None:
    reply = assistant("Done.", thinking="t")
    tail = [custom("openclaw.cache-ttl"), custom("openclaw:bootstrap-context:full")]
    index = index_of(run([header(), user("go"), reply, *tail]))
    assert index.answer(SESSION, reply["id"]).processed
    # the watermark is the last RECENT_IDS entries: far behind them, "not yet" is the answer
    index = index_of(run([header(), user("go"), reply,
                          *[custom(f"c{n}") for n in range(RECENT_IDS)]]))
    assert not index.answer(SESSION, reply["id"]).processed


def test_a_redelivered_entry_is_not_a_copy_of_itself() -> None:
    reply = assistant("Done.", thinking="t")
    verdicts = run([header(), user("go"), reply, reply])  # the same line delivered twice
    assert verdicts[-1].alerts[0].kind == "redelivery"
    result = index_of(verdicts).answer(SESSION, reply["id"])
    assert result.processed
    assert result.dropped == {}


def test_a_copy_of_a_copy_answers_the_entry_that_was_kept() -> None:
    index = VerdictIndex(max_ids=10, ttl=60)
    index.dropped(SESSION, "copy-2", "copy-1", at=1)
    index.dropped(SESSION, "copy-1", "reply", at=1)
    assert index.answer(SESSION, "copy-2").dropped == {"copy-1": "reply", "copy-2": "reply"}


def test_a_successor_session_gets_its_predecessors_copies() -> None:
    index = VerdictIndex(max_ids=10, ttl=60)
    index.dropped("before", "copy", "reply", at=1)
    index.processed("after", "summary-turn", at=2)
    result = index.answer("after", "summary-turn", predecessors=["before"])
    assert result.processed
    assert result.dropped == {"copy": "reply"}
    assert index.answer("after", "summary-turn").dropped == {}


def test_each_session_keeps_at_most_max_ids_copies_the_oldest_forgotten_first() -> None:
    index = VerdictIndex(max_ids=3, ttl=60)
    for n in range(5):
        index.dropped(SESSION, f"copy-{n}", "reply", at=n)
    assert list(index.answer(SESSION, "copy-4").dropped) == ["copy-2", "copy-3", "copy-4"]


def test_sessions_idle_longer_than_the_ttl_are_forgotten() -> None:
    index = VerdictIndex(max_ids=10, ttl=100)
    index.dropped("old", "copy", "reply", at=1000)
    index.processed("recent", "entry", at=1050)
    assert index.forget_idle(now=1101) == 1
    assert sorted(index.sessions) == ["recent"]
    assert index.answer("old", "copy").reason == "no entry of the session processed yet"


def test_records_that_are_not_the_workers_outputs_change_nothing() -> None:
    index = VerdictIndex(max_ids=10, ttl=60)
    kept_alert = {"action": "kept", "kind": "consecutive_assistant", "session_id": SESSION,
                  "entry_id": "e1", "related_entry_id": "e0"}
    assert read_alert(index, orjson.dumps(kept_alert), 1)
    assert not read_alert(index, b"not json", 1)
    assert not read_alert(index, orjson.dumps({"action": "dropped", "session_id": SESSION,
                                               "entry_id": None}), 1)
    assert not read_clean(index, None, b'{"id":"e2"}', 1)
    assert not read_clean(index, SESSION.encode(), b'{"type":"message"}', 1)
    result = index.answer(SESSION, "e1")
    assert (result.processed, result.dropped) == (True, {})


def test_a_mirror_kept_as_a_second_delivery_is_never_answered_as_dropped() -> None:
    reply = assistant("Report attached.", thinking="t")
    other = mirror("Sent separately.", idempotency_key="send-1")
    again = mirror("Report attached.", idempotency_key="send-2")
    verdicts = run([header(), user("send it"), reply, other, again])
    result = index_of(verdicts).answer(SESSION, again["id"])
    assert result.processed
    assert result.dropped == {}
