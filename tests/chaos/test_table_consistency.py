"""The worker's tables, read back from their changelogs, equal a rebuild from the input topic."""

from __future__ import annotations

import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest

from stream.engine import DictMemory, Engine, KafkaOrigin, Session, SessionState
from stream.worker import codec
from stream.worker.app import changelog_topics
from stream.worker.tables import StoredSession
from tests.support.harness import (
    WorkerProcess,
    consume_all,
    produce,
    run,
    worker_settings,
)
from tests.support.outputs import wait_for_outputs
from tests.support.workload import workload

pytestmark = pytest.mark.integration


def latest_values(records) -> dict[bytes, bytes]:
    """A changelog's table: the last value per key, tombstones removing it (as compaction
    and recovery do)."""
    table: dict[bytes, bytes] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        if record.value is None:
            table.pop(record.key, None)
        else:
            table[record.key] = record.value
    return table


def rebuild(input_records) -> dict[str, Session]:
    """The engine over the input topic as the worker saw it: same sources, same order."""
    engine = Engine()
    sessions: dict[str, Session] = {}
    for record in sorted(input_records, key=lambda r: (r.partition, r.offset)):
        session_id = record.key.decode()
        session = sessions.setdefault(
            session_id, Session(session_id, SessionState(), DictMemory(engine.limits.max_ids))
        )
        engine.process(session, record.value, KafkaOrigin(record.topic, record.partition,
                                                          record.offset))
    return sessions


def test_changelogs_hold_the_state_an_offline_rebuild_gives(broker, tmp_path: Path) -> None:
    records = workload(2000, 80, seed=5)
    settings = worker_settings(broker, "tables", tmp_path, batch_size=100)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        run(produce(settings, records))
        time.sleep(1.5)
        worker.stop(signal.SIGKILL)
        worker = WorkerProcess(settings, tmp_path / "worker.log").start()
        wait_for_outputs(settings, records, workers=[worker])
    finally:
        worker.stop()
    expected = rebuild(run(consume_all(settings, settings.input_topic)))
    sessions_log, memory_log = changelog_topics(settings)
    states = latest_values(run(consume_all(settings, sessions_log)))
    memory = latest_values(run(consume_all(settings, memory_log)))

    assert {key.decode() for key in states} == set(expected)
    got_memory: dict[str, dict[str, list]] = defaultdict(dict)
    for session_id, session in expected.items():
        stored = StoredSession.from_bytes(states[session_id.encode()])
        assert stored.state.to_list() == session.state.to_list(), session_id
        got_memory[session_id].update(stored.memory or {})  # a small session's, in its state
    for key, value in memory.items():
        session_id, name = key.split(b"\x00", 1)
        got_memory[session_id.decode()][name.decode()] = codec.unpack(value)
    for session_id, session in expected.items():
        assert got_memory[session_id] == session.memory._values, session_id
