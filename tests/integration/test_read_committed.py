"""Every reader reads committed: what an aborted transaction wrote is never read, neither by
`tail` and the memory writer on an output topic nor by the worker restoring its tables, and a
changelog that ends in a commit marker is restored to its end.

Apache Kafka only: aiokafka's transactional producer needs InitProducerId, which Tansu 0.6.0
refuses (docs/brokers.md).
"""

from __future__ import annotations

import time
from pathlib import Path

from aiokafka import AIOKafkaProducer

from stream.consumers.consume import consume
from stream.consumers.memory_writer.files import MemoryWriter
from stream.consumers.memory_writer.sink import MemorySink
from stream.engine import SessionState
from stream.kafka.admin import create_topics, ensure_topics
from stream.worker.app import changelog_topics
from stream.worker.tables import StoredSession
from tests.support.harness import WorkerProcess, consume_all, kafka_only, run, worker_settings
from tests.support.workload import corpus_sessions

pytestmark = kafka_only(
    "Tansu 0.6.0 refuses aiokafka's transactional producer (InitProducerId), so "
    "nothing is written in transactions there; the Kafka suite runs this test"
)


async def write(bootstrap: str, topic: str, transactions: list[tuple[bool, list]],
                name: str) -> None:
    """Transactions of (key, value) records to partition 0, each committed (True) or aborted."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=name)
    await producer.start()
    try:
        for commit, records in transactions:
            await producer.begin_transaction()
            for key, value in records:
                await producer.send_and_wait(topic, value, key=key, partition=0)
            if commit:
                await producer.commit_transaction()
            else:
                await producer.abort_transaction()
    finally:
        await producer.stop()


def test_tail_and_the_memory_writer_never_read_an_aborted_record(broker, tmp_path: Path) -> None:
    settings = worker_settings(broker, "committedreads", tmp_path)
    create_topics(broker.bootstrap, {settings.clean_topic: 1})
    header, *entries = next(s for s in corpus_sessions() if len(s) >= 4)
    key = b"committed-reads"
    # three messages, each a line of the memory file
    first, aborted, last = [raw for raw in entries if b'"role":"user"' in raw
                            or b'"role":"assistant"' in raw][:3]
    run(write(broker.bootstrap, settings.clean_topic,
              [(True, [(key, header), (key, first)]), (False, [(key, aborted)]),
               (True, [(key, last)])], "committed-reads-test"))

    assert [r.value for r in run(consume_all(settings, settings.clean_topic))] == [
        header, first, last]

    written = MemoryWriter(tmp_path / "memory")
    run(consume(settings, settings.clean_topic, MemorySink(written), "committed-reads-writer",
                follow=False))
    expected = MemoryWriter(tmp_path / "expected")
    expected.write((key.decode(), raw) for raw in (header, first, last))
    (file,) = (tmp_path / "expected").glob("*.md")
    assert (tmp_path / "memory" / file.name).read_bytes() == file.read_bytes()


def test_a_restored_table_holds_no_aborted_changelog_record(broker, tmp_path: Path) -> None:
    settings = worker_settings(broker, "restorecommitted", tmp_path)
    sessions_changelog = changelog_topics(settings)[0]
    ensure_topics(settings, changelog_topics(settings))
    state = StoredSession(SessionState(), time.time(), 0).to_bytes()
    # ends in a commit marker, the offset after the last record, which no reader receives
    run(write(broker.bootstrap, sessions_changelog,
              [(True, [(b"kept", state)]), (False, [(b"aborted", state)]),
               (True, [(b"kept-too", state)])], "restore-committed-test"))
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        stats = worker.stats()
    finally:
        worker.stop()
    assert stats["table_keys"]["sessions"] == 2  # kept, kept-too; never aborted
