"""The memory writer as a sink of the consumer loop (`stream.consumers.consume`)."""

from __future__ import annotations

from aiokafka import ConsumerRecord, TopicPartition

from stream.consumers.memory_writer.files import MemoryWriter


class MemorySink:
    """Writes records to the memory files of a `MemoryWriter`, durable when `write` returns."""

    counts = "lines"

    def __init__(self, writer: MemoryWriter) -> None:
        self.writer = writer

    def write(self, records: list[ConsumerRecord]) -> int:
        # A session's records share a key, hence a partition, and come in order. The headers
        # carry what the source knew of the session (its key, agent, the session it follows),
        # for the file's header.
        return self.writer.write(
            (record.key.decode("utf-8", "replace"), record.value, tuple(record.headers or ()))
            for record in records
            if record.key is not None and record.value is not None
        )

    def revoke(self, partitions: list[TopicPartition]) -> None:
        # Partitions (so sessions) may move to another writer sharing the folder: their files
        # are read again from disk when they come back.
        self.writer.forget()
