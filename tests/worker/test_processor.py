"""The worker's batch logic without Kafka: outputs, dead letters, replay after a crash, TTL."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from jsonschema import Draft202012Validator

from stream.engine import Engine, SessionState
from stream.settings import Settings
from stream.worker.commit import too_large_notice
from stream.worker.processor import BatchProcessor, InRecord
from stream.worker.tables import StoredSession, TableStore, TransactionClosed
from tests.support.builders import assistant, encode, header, mirror, user

SETTINGS = Settings.load(environ={}).replace(session_ttl=3600.0)


def table_store() -> TableStore:
    """The worker's store over two plain dicts, as its memory:// tables hold them."""
    return TableStore({}, {}, "sessions-changelog", "memory-changelog")


def stored_sessions(store: TableStore) -> set[str]:
    return {session_id for session_id, _, _ in store.sessions()}


def sessions_in_memory(store: TableStore) -> set[str]:
    return {key.split(b"\x00", 1)[0].decode() for key in store._memory}


def records(session_id: str, lines: list[bytes], partition: int = 2, first_offset: int = 0):
    return [
        InRecord("events", partition, first_offset + i, session_id.encode(), line)
        for i, line in enumerate(lines)
    ]


def session_lines(session_id: str = "s1") -> list[bytes]:
    return encode([
        header(session_id),
        user("hi", parent=None),
        assistant("Hello! How can I help?", thinking="greet"),
        mirror("Hello! How can I help?"),
        user("thanks"),
    ])


def long_session_lines(session_id: str, turns: int = 6) -> list[bytes]:
    """More than a stored session holds of a memory (INLINE_VALUES): a few turns."""
    later = [item for n in range(turns) for item in (user(f"and {n}?"), assistant(f"{n}."))]
    return encode([header(session_id), user("hi", parent=None), *later])


def outputs_of(processor: BatchProcessor, batch, now: float = 1000.0) -> list:
    return processor.process(batch, now).outputs


def test_outputs_go_to_the_input_partition_in_input_order() -> None:
    processor = BatchProcessor(Engine(), table_store(), SETTINGS)
    lines = session_lines()
    outputs = outputs_of(processor, records("s1", lines))
    clean = [o for o in outputs if o.topic == SETTINGS.clean_topic]
    alerts = [orjson.loads(o.value) for o in outputs if o.topic == SETTINGS.alerts_topic]
    assert [o.value for o in clean[:3]] == lines[:3]
    # the user message hung from the dropped mirror: re-parented to the reply it repeated
    reparented = orjson.loads(clean[3].value)
    assert reparented == {**orjson.loads(lines[4]), "parentId": orjson.loads(lines[2])["id"]}
    assert {o.partition for o in outputs} == {2}
    assert {o.key for o in outputs} == {b"s1"}
    assert [a["kind"] for a in alerts] == ["delivery_mirror_duplicate"]
    assert alerts[0]["source"] == {"topic": "events", "partition": 2, "offset": 3}


def test_clean_records_carry_the_session_headers_of_their_input() -> None:
    """What the source knew of the session (agent, key, the session it follows) reaches the
    memory writers; other headers and the other topics get none."""
    processor = BatchProcessor(Engine(), table_store(), SETTINGS)
    lines = session_lines()
    session = [("openclaw-session-key", b"agent:main:main"), ("openclaw-agent-id", b"main")]
    batch = records("s1", lines)
    for record in batch:
        record.headers = [*session, ("traceparent", b"00-ab")]
    batch[1].headers = {"openclaw-window-reason": b"reset"}  # Faust may give a mapping
    batch[2].headers = None
    outputs = outputs_of(processor, batch)
    clean = [o.headers for o in outputs if o.topic == SETTINGS.clean_topic]
    assert clean == [session, [("openclaw-window-reason", b"reset")], None, session]
    assert {o.headers is None for o in outputs if o.topic == SETTINGS.alerts_topic} == {True}


def test_records_without_a_usable_key_or_value_are_dead_lettered() -> None:
    processor = BatchProcessor(Engine(), table_store(), SETTINGS)
    line = session_lines()[1]
    batch = [
        InRecord("events", 0, 0, None, line),
        InRecord("events", 0, 1, b"\xff\xfe", line),
        InRecord("events", 0, 2, b"s1", None),
        InRecord("events", 0, 3, b"s1", b"\x00garbage"),
    ]
    outputs = outputs_of(processor, batch)
    letters = [o for o in outputs if o.topic == SETTINGS.dlq_topic]
    reasons = [orjson.loads(o.value)["reason"] for o in letters]
    assert len(letters) == 4
    assert reasons[:3] == [
        "record has no key (the session id)",
        "key is not UTF-8",
        "record has no value",
    ]
    assert reasons[3].startswith("not")
    assert dict(letters[0].headers) == {"reason": reasons[0].encode(), "source": b"events/0/0"}
    assert processor.tally.dead_lettered == 4 and processor.tally.balanced()


def test_a_batch_carries_the_changelog_of_the_state_it_wrote() -> None:
    store = table_store()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    small = processor.process(records("s1", session_lines()), 1000.0)
    grown = processor.process(records("s2", long_session_lines("s2")), 1000.0)

    # a small session: its state, which holds its memory
    assert [(r.topic, r.partition, r.key) for r in small.changelog] == [
        ("sessions-changelog", 2, b"s1")]
    assert small.changelog[0].value == store._sessions[b"s1"]
    # a larger one: the state comes last, after the memory values it refers to
    assert {(r.topic, r.partition) for r in grown.changelog} == {
        ("memory-changelog", 2), ("sessions-changelog", 2)}
    assert (grown.changelog[-1].topic, grown.changelog[-1].key) == ("sessions-changelog", b"s2")
    assert grown.changelog[-1].value == store._sessions[b"s2"]
    assert {r.key: r.value for r in grown.changelog[:-1]} == store._memory


def test_a_closed_transaction_takes_no_more_writes() -> None:
    store = table_store()
    transaction = store.transaction()
    transaction.save("s1", StoredSession(SessionState(), 1000.0, 2), {})
    changelog = transaction.close()
    with pytest.raises(TransactionClosed):
        transaction.save("s2", StoredSession(SessionState(), 1000.0, 2), {})
    with pytest.raises(TransactionClosed):
        transaction.forget({"s1": 2})
    # the refused writes changed neither the tables nor the changelog handed over
    assert [r.key for r in changelog] == [b"s1"] and stored_sessions(store) == {"s1"}


def test_a_batch_replayed_before_its_state_was_saved_gives_the_same_outputs() -> None:
    batch = records("s1", session_lines())
    first = outputs_of(BatchProcessor(Engine(), table_store(), SETTINGS), batch)
    # crash before the changelog landed: a new worker recovers the old (empty) state
    again = outputs_of(BatchProcessor(Engine(), table_store(), SETTINGS), batch)
    assert again == first


def test_a_batch_replayed_after_its_state_was_saved_gives_the_same_outputs() -> None:
    store = table_store()
    batch = records("s1", session_lines())
    first = outputs_of(BatchProcessor(Engine(), store, SETTINGS), batch)
    # crash after the changelog landed but before the offset commit: the batch comes again
    again = outputs_of(BatchProcessor(Engine(), store, SETTINGS), batch)
    assert again == first


def test_state_written_by_a_batch_survives_into_the_next_one() -> None:
    store = table_store()
    lines = session_lines()
    outputs_of(BatchProcessor(Engine(), store, SETTINGS), records("s1", lines[:3]))
    # the mirror arrives in the next batch, seen by a new worker that recovered the tables
    outputs = outputs_of(BatchProcessor(Engine(), store, SETTINGS),
                         records("s1", lines[3:4], first_offset=3))
    assert [o.topic for o in outputs] == [SETTINGS.alerts_topic]
    assert orjson.loads(outputs[0].value)["kind"] == "delivery_mirror_duplicate"


def test_idle_sessions_are_forgotten_with_their_memory() -> None:
    store = table_store()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    processor.process(records("old", session_lines("old")), 1000.0)
    processor.process(records("old-long", long_session_lines("old-long")), 1000.0)
    processor.process(records("new", long_session_lines("new"), partition=1), 1000.0 + 3000)
    remembered = len(store._memory)
    assert processor.process([], 1000.0 + 3000, sweep=True).forgotten == 0
    swept = processor.process([], 1000.0 + 3700, sweep=True)
    assert swept.forgotten == 2
    assert stored_sessions(store) == {"new"} and sessions_in_memory(store) == {"new"}
    # tombstones for the sessions and each value of a memory in the memory table, on their
    # partition (a small session's memory goes with its state)
    assert {(r.partition, r.value) for r in swept.changelog} == {(2, None)}
    assert sorted(r.key for r in swept.changelog if r.topic == "sessions-changelog") == [
        b"old", b"old-long"]
    assert sum(r.topic == "memory-changelog" for r in swept.changelog) == remembered - len(
        store._memory) > 0


def test_an_idle_session_stores_a_few_hundred_bytes() -> None:
    store = table_store()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    processor.process(records("s1", session_lines()), 1000.0)
    processor.process(records("s2", long_session_lines("s2")), 1000.0)
    # a small one in its state, memory included; a larger one's state, and each value of its
    # memory in the table
    assert len(store._sessions[b"s1"]) <= 400
    assert len(store._sessions[b"s2"]) <= 300
    assert max(len(value) for value in store._memory.values()) <= 120


def test_an_output_too_large_for_the_broker_becomes_a_dead_letter_notice() -> None:
    processor = BatchProcessor(Engine(), table_store(), SETTINGS)
    kept = outputs_of(processor, records("s1", session_lines()[:1]))[0]
    notice = too_large_notice(kept, SETTINGS.dlq_topic)
    body = orjson.loads(notice.value)
    schema = json.loads((Path(__file__).parents[2] / "schemas" / "dead-letter.schema.json")
                        .read_text())
    Draft202012Validator(schema).validate(body)
    assert (notice.topic, notice.partition, notice.key) == (SETTINGS.dlq_topic, 2, b"s1")
    assert body["raw_encoding"] == "omitted" and body["raw"] == ""
    assert body["source"] == {"topic": "events", "partition": 2, "offset": 0}
    assert str(len(kept.value)) in body["reason"]


def test_sessions_of_partitions_taken_away_during_the_batch_are_not_written() -> None:
    store = table_store()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    batch = [*records("kept-here", session_lines("kept-here"), partition=1),
             *records("moved-away", session_lines("moved-away"), partition=2)]
    batch += records("grown-away", long_session_lines("grown-away"), partition=2)
    written = processor.process(batch, 1000.0, owned={1})
    assert stored_sessions(store) == {"kept-here"} and sessions_in_memory(store) == set()
    assert {r.partition for r in written.changelog} == {1}


def test_a_session_the_ttl_forgot_is_named_when_it_comes_back() -> None:
    store = table_store()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    lines = session_lines()
    processor.process(records("s1", lines[:3]), 1000.0)
    assert processor.process([], 1000.0 + 3700, owned={2}, sweep=True).forgotten == 1
    # a week later the mirror of the forgotten reply comes: nothing tells it is a copy
    outputs = outputs_of(processor, records("s1", lines[3:4], first_offset=3), now=4800.0)
    kinds = [orjson.loads(o.value)["kind"] for o in outputs if o.topic == SETTINGS.alerts_topic]
    assert kinds == ["session_seen_midway"]


def test_only_the_owner_of_a_partition_forgets_its_idle_sessions() -> None:
    store = table_store()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    batch = [*records("mine", session_lines("mine"), partition=1),
             *records("standby", session_lines("standby"), partition=3)]
    processor.process(batch, 1000.0)
    assert processor.process([], 1000.0 + 3700, owned={1}, sweep=True).forgotten == 1
    assert stored_sessions(store) == {"standby"}
