"""Where the lane stands in each input partition it owns: the next offset it must process.

The lane processes a partition's records in offset order from the position it holds, and
holds one only for the partitions of the current assignment. A position is taken when the
partition's first records arrive in an assignment: the group's committed offset, or, with
none, the earliest offset the partition still has. Faust's consumer leaves the fetch position
where it was when a partition has no commit (aiokafka's `seek_to_committed` seeks only to a
committed offset above 0), and Faust drops records it fetched while its flow was stopped or
its generation changed; so the lane seeks every partition it takes to its position itself, and
seeks back to it whenever records the consumer handed on did not reach it
(`untaken`). Between those seeks the consumer hands on every record of the partition in order,
so an offset the lane does not see holds no record (a transaction marker, a record removed by
retention): a gap, which commits may pass.

Pure bookkeeping, no Kafka: the lane (stream.worker.lane) does the seeking.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Generic, TypeVar

Partition = TypeVar("Partition", bound=Hashable)


class ReadPositions(Generic[Partition]):
    def __init__(self) -> None:
        self._next: dict[Partition, int] = {}

    def place(self, tp: Partition, offset: int) -> None:
        """The partition's records are processed from `offset` on."""
        self._next[tp] = offset

    def forget(self, tps: Iterable[Partition]) -> None:
        """The partitions left this worker: a later assignment places them afresh."""
        for tp in tps:
            self._next.pop(tp, None)

    def keep_only(self, tps: Iterable[Partition]) -> None:
        owned = set(tps)
        self.forget([tp for tp in self._next if tp not in owned])

    def get(self, tp: Partition) -> int | None:
        return self._next.get(tp)

    def advance(self, tp: Partition, offset: int) -> int | None:
        """The position before the record at `offset`, moved past the record unless it lies
        before it (processed already); None for a partition not placed in this assignment.
        A record after the position follows offsets that hold none: a gap."""
        position = self._next.get(tp)
        if position is not None and offset >= position:
            self._next[tp] = offset + 1
        return position

    def untaken(self, handed: Mapping[Partition, int]) -> list[Partition]:
        """The placed partitions whose records the consumer handed on up to `handed` (the last
        offset per partition) but that did not all reach the lane."""
        return [tp for tp, last in handed.items()
                if (position := self._next.get(tp)) is not None and position <= last]
