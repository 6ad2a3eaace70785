"""The memory writer as a sink: what it writes of a batch of records, and what a revoke drops."""

from __future__ import annotations

from pathlib import Path

from aiokafka import ConsumerRecord, TopicPartition

from stream.consumers.memory_writer.files import MemoryWriter
from stream.consumers.memory_writer.sink import MemorySink
from tests.support.memory import assistant, markdown, raw, user


def record(key: bytes | None, value: bytes | None, offset: int = 0) -> ConsumerRecord:
    return ConsumerRecord("clean", 0, offset, 0, 0, key, value, None, 0, 0, [])


def test_records_without_a_key_or_a_value_are_passed_over(tmp_path: Path) -> None:
    sink = MemorySink(MemoryWriter(tmp_path))
    header = raw({"type": "session", "version": 3, "id": "s"})
    batch = [record(b"s", header, 0), record(b"s", raw(user("hi")), 1), record(None, b"x", 2),
             record(b"s", None, 3), record(b"s", raw(assistant("hello")), 4)]

    assert sink.write(batch) == 2
    assert "hello" in markdown(tmp_path, "s")


def test_a_revoke_forgets_the_cached_sessions(tmp_path: Path) -> None:
    writer = MemoryWriter(tmp_path)
    sink = MemorySink(writer)
    sink.write([record(b"s", raw({"type": "session", "version": 3, "id": "s"}))])
    assert writer._sessions

    sink.revoke([TopicPartition("clean", 0)])

    assert not writer._sessions
