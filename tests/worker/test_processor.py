"""The worker's batch logic without Kafka: outputs, dead letters, replay after a crash, TTL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import orjson
from jsonschema import Draft202012Validator

from stream.engine import Engine
from stream.settings import Settings
from stream.worker import codec
from stream.worker.processor import BatchProcessor, InRecord, StoredSession, too_large_notice
from tests.engine.builders import assistant, encode, header, mirror, user

SETTINGS = Settings.load(environ={}).replace(session_ttl=3600.0)


class DictStore:
    """A StateStore in two dicts, as the Faust tables hold it after recovery."""

    def __init__(self) -> None:
        self.states: dict[str, bytes] = {}
        self.memory: dict[tuple[str, str], bytes] = {}

    def load(self, session_id: str) -> StoredSession | None:
        data = self.states.get(session_id)
        return StoredSession.from_bytes(data) if data is not None else None

    def recall(self, session_id: str, key: str) -> list | None:
        data = self.memory.get((session_id, key))
        return codec.unpack(data) if data is not None else None

    def save(self, session_id: str, stored: StoredSession, memory: dict[str, list]) -> None:
        for key, value in memory.items():
            self.memory[session_id, key] = codec.pack(value)
        self.states[session_id] = stored.to_bytes()

    def sessions(self) -> Iterator[tuple[str, StoredSession]]:
        for session_id, data in list(self.states.items()):
            yield session_id, StoredSession.from_bytes(data)

    def forget(self, sessions: dict[str, int]) -> int:
        for key in [k for k in self.memory if k[0] in sessions]:
            del self.memory[key]
        for session_id in sessions:
            del self.states[session_id]
        return len(sessions)


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


def test_outputs_go_to_the_input_partition_in_input_order() -> None:
    processor = BatchProcessor(Engine(), DictStore(), SETTINGS)
    lines = session_lines()
    outputs = processor.process(records("s1", lines))
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


def test_records_without_a_usable_key_or_value_are_dead_lettered() -> None:
    processor = BatchProcessor(Engine(), DictStore(), SETTINGS)
    line = session_lines()[1]
    batch = [
        InRecord("events", 0, 0, None, line),
        InRecord("events", 0, 1, b"\xff\xfe", line),
        InRecord("events", 0, 2, b"s1", None),
        InRecord("events", 0, 3, b"s1", b"\x00garbage"),
    ]
    outputs = processor.process(batch)
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


def test_a_batch_replayed_before_its_state_was_saved_gives_the_same_outputs() -> None:
    store = DictStore()
    batch = records("s1", session_lines())
    first = BatchProcessor(Engine(), store, SETTINGS).process(batch)
    # crash: no flush, so a new worker sees the old (empty) state
    again = BatchProcessor(Engine(), store, SETTINGS).process(batch)
    assert again == first


def test_a_batch_replayed_after_its_state_was_saved_gives_the_same_outputs() -> None:
    store = DictStore()
    batch = records("s1", session_lines())
    processor = BatchProcessor(Engine(), store, SETTINGS)
    first = processor.process(batch)
    processor.flush(now=1000.0)
    # crash after the state write but before the offset commit: the batch comes again
    again = BatchProcessor(Engine(), store, SETTINGS).process(batch)
    assert again == first


def test_state_written_at_flush_survives_into_the_next_batch() -> None:
    store = DictStore()
    lines = session_lines()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    processor.process(records("s1", lines[:3]))
    processor.flush(now=1000.0)
    # the mirror arrives in the next batch, seen by a new worker that recovered the tables
    outputs = BatchProcessor(Engine(), store, SETTINGS).process(
        records("s1", lines[3:4], first_offset=3)
    )
    assert [o.topic for o in outputs] == [SETTINGS.alerts_topic]
    assert orjson.loads(outputs[0].value)["kind"] == "delivery_mirror_duplicate"


def test_idle_sessions_are_forgotten_with_their_memory() -> None:
    store = DictStore()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    processor.process(records("old", session_lines("old")))
    processor.flush(now=1000.0)
    processor.process(records("new", session_lines("new"), partition=1))
    processor.flush(now=1000.0 + 3000)
    assert processor.expire(now=1000.0 + 3700) == 1
    assert set(store.states) == {"new"}
    assert {session for session, _ in store.memory} == {"new"}


def test_an_idle_session_stores_a_few_hundred_bytes() -> None:
    store = DictStore()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    processor.process(records("s1", session_lines()))
    processor.flush(now=1000.0)
    assert len(store.states["s1"]) <= 300
    assert max(len(value) for value in store.memory.values()) <= 120


def test_an_output_too_large_for_the_broker_becomes_a_dead_letter_notice() -> None:
    processor = BatchProcessor(Engine(), DictStore(), SETTINGS)
    kept = processor.process(records("s1", session_lines()[:1]))[0]
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
    store = DictStore()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    processor.process(records("kept-here", session_lines("kept-here"), partition=1))
    processor.process(records("moved-away", session_lines("moved-away"), partition=2))
    processor.flush(now=1000.0, owned={1})
    assert set(store.states) == {"kept-here"}
    assert {session for session, _ in store.memory} == {"kept-here"}


def test_only_the_owner_of_a_partition_forgets_its_idle_sessions() -> None:
    store = DictStore()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    processor.process(records("mine", session_lines("mine"), partition=1))
    processor.process(records("standby", session_lines("standby"), partition=3))
    processor.flush(now=1000.0)
    assert processor.expire(now=1000.0 + 3700, owned={1}) == 1
    assert set(store.states) == {"standby"}
