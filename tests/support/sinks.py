"""Running the consumer loop without files: a fake sink that keeps what it was given."""

from __future__ import annotations

from aiokafka import ConsumerRecord, TopicPartition


class KeepingSink:
    """Keeps every record written, as (key, value); fails the first `failures` writes."""

    counts = "records"

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.written: list[tuple[bytes | None, bytes | None]] = []
        self.revoked: list[TopicPartition] = []

    def write(self, records: list[ConsumerRecord]) -> int:
        if self.failures:
            self.failures -= 1
            raise OSError("the sink's disk is full")
        self.written += [(record.key, record.value) for record in records]
        return len(records)

    def revoke(self, partitions: list[TopicPartition]) -> None:
        self.revoked += partitions
