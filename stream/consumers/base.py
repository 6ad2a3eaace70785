"""The contract of a sink: what the consumer loop of `stream.consumers.consume` asks of everything
that writes the worker's outputs somewhere, the mirror of a source (`stream.sources.base`).

A sink writes a batch durably and only then returns; the loop commits the batch's offsets after
that, so a crash in between hands the batch to the sink again (at least once). A sink that keeps
something per partition lets go of it when the partition is taken away: another member of the
group writes it from then on. The memory writer is the first sink
(`stream.consumers.memory_writer.sink`).
"""

from __future__ import annotations

from typing import Protocol

from aiokafka import ConsumerRecord, TopicPartition


class Sink(Protocol):
    # What `write` counts, for the progress line: "lines" for the memory writer.
    counts: str

    def write(self, records: list[ConsumerRecord]) -> int:
        """Write `records` (each partition's in offset order) durably; returns how many things
        (`counts`) were written. Raising writes nothing the loop commits."""
        ...

    def revoke(self, partitions: list[TopicPartition]) -> None:
        """Let go of what is held for `partitions`, taken away by a rebalance."""
        ...
