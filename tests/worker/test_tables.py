"""Where the worker's store keeps what a session remembers: in the session's stored value while
it holds at most INLINE_VALUES values, then in the memory table (state format 3). Where it lives
changes nothing the engine is given: the same values, the same outputs."""

from __future__ import annotations

from stream.engine import DictMemory, Engine, KafkaOrigin, Limits, Session, SessionState
from stream.settings import Settings
from stream.worker import codec
from stream.worker.processor import BatchProcessor, InRecord
from stream.worker.tables import INLINE_VALUES, StoredSession, TableStore
from tests.support.builders import assistant, encode, header, user
from tests.support.workload import corpus_sessions, workload

SETTINGS = Settings.load(environ={})
TOPIC = "events"


def table_store(state_format: int = codec.STATE_FORMAT) -> TableStore:
    return TableStore({}, {}, "sessions-changelog", "memory-changelog", state_format)


def stored(store: TableStore, session_id: str) -> StoredSession:
    return StoredSession.from_bytes(store._sessions[session_id.encode()])


def in_table(store: TableStore, session_id: str) -> dict[str, list]:
    prefix = session_id.encode() + b"\x00"
    return {key[len(prefix):].decode(): codec.unpack(value)
            for key, value in store._memory.items() if key.startswith(prefix)}


def test_a_session_keeps_its_memory_in_its_state_until_it_outgrows_it() -> None:
    lines = next(lines for lines in corpus_sessions() if len(lines) >= 40)[:40]
    store = table_store()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    engine = Engine()
    offline = Session("s1", SessionState(), DictMemory(engine.limits.max_ids))
    moved_at = None
    for offset, line in enumerate(lines):  # one entry a batch, each written back
        batch = processor.process([InRecord(TOPIC, 0, offset, b"s1", line)], 1000.0)
        engine.process(offline, line, KafkaOrigin(TOPIC, 0, offset))
        remembered = offline.memory._values
        memory = stored(store, "s1").memory
        if len(remembered) <= INLINE_VALUES:
            assert memory == remembered and in_table(store, "s1") == {}
            assert [r.topic for r in batch.changelog] == ["sessions-changelog"]
            continue
        # outgrown: every value in the table, for good
        assert memory is None and in_table(store, "s1") == remembered
        if moved_at is None:
            moved_at = offset
            assert sum(r.topic == "memory-changelog" for r in batch.changelog) == len(remembered)
    assert moved_at is not None and moved_at > 1


def test_a_state_holds_a_memory_of_as_many_values_as_it_may_and_no_more() -> None:
    # a header, then user turns and their replies, a line at a time: the memory lives in the
    # stored session while it has at most INLINE_VALUES values, then in the table for good
    turns = [item for n in range(6) for item in (user(f"q{n}"), assistant(f"a{n}"))]
    lines = encode([header("s1"), *turns])
    assert INLINE_VALUES == 8
    store = table_store()
    processor = BatchProcessor(Engine(), store, SETTINGS)
    inline_sizes = []
    for n, line in enumerate(lines):
        processor.process([InRecord(TOPIC, 0, n, b"s1", line)], 1000.0)
        memory = stored(store, "s1").memory
        if memory is None:
            break
        inline_sizes.append(len(memory))

    assert inline_sizes and max(inline_sizes) <= INLINE_VALUES
    assert stored(store, "s1").memory is None
    assert len(in_table(store, "s1")) > INLINE_VALUES


def test_where_a_session_keeps_its_memory_changes_no_output() -> None:
    """A worker writing format 2 (`--upgrade-from 0.2`) keeps every session's memory in the
    table: batch after batch, its outputs are a worker's writing format 3 (`--upgrade-from
    0.3`, which keeps small memories in the stored session), byte for byte; neither keeps the
    identity index format 4 added."""
    records = [InRecord(TOPIC, 0, offset, key, value)
               for offset, (key, value) in enumerate(workload(3000, 150, seed=11))]
    small_first, in_table_only = table_store(state_format=3), table_store(state_format=2)
    inline, table = (BatchProcessor(Engine(Limits(state_format=store.state_format)), store,
                                    SETTINGS)
                     for store in (small_first, in_table_only))
    for start in range(0, len(records), 7):
        batch = records[start:start + 7]
        got = inline.process(batch, 1000.0).outputs
        expected = table.process(batch, 1000.0).outputs
        assert [(o.topic, o.value) for o in got] == [(o.topic, o.value) for o in expected]
    kept_in_state = [sid for sid, _, _ in small_first.sessions()
                     if stored(small_first, sid).memory is not None]
    assert 0 < len(kept_in_state) < small_first.size()[0]  # both places were read
    assert all(stored(in_table_only, sid).memory is None for sid, _, _ in
               in_table_only.sessions())
