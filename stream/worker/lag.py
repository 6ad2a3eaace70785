"""How far behind the worker is: records not yet processed, per assigned input partition."""

from __future__ import annotations

import asyncio

import faust

from stream.kafka import internals

# A fetch position is local once the consumer has one; asking for one it does not have yet (a
# rebalance under way) may wait on the broker, and is left for the next reading instead.
POSITION_TIMEOUT = 2.0


class Lag:
    """Counted from what this worker processed (`processed`, the next offset per partition)
    or, for a partition it has not processed yet, from the group's committed offset, up to the
    newest record the consumer has seen.

    Offsets that hold no record (the commit marker after a transaction's records, a record
    compaction removed) are never processed: the consumer's fetch position passes them, and
    counting from it too keeps a partition that ends in a marker from looking one record
    behind forever (which made the stall watch restart an idle worker on a transactional
    input). The fetch positions are read by `refresh`, which whoever reports lag awaits first.
    """

    def __init__(self, app: faust.App, topic: str, processed: dict[int, int]) -> None:
        self._app = app
        self._topic = topic
        self._processed = processed
        self._fetched: dict[int, int] = {}  # per partition, the fetch position last read

    async def refresh(self) -> None:
        """Read the consumer's fetch position of each assigned input partition.

        The position is past every record the consumer handed on, and past the offsets
        without a record it read over; a record handed on is in the lane's batch at once, so
        between it and what was processed lies nothing but such offsets (or, for a moment, a
        fetch on its way)."""
        consumer = self._app.consumer
        owned = [tp for tp in consumer.assignment() if tp.topic == self._topic]
        found = await asyncio.gather(
            *(asyncio.wait_for(consumer.position(tp), POSITION_TIMEOUT) for tp in owned),
            return_exceptions=True)
        self._fetched = {tp.partition: position for tp, position in zip(owned, found, strict=True)
                         if isinstance(position, int)}

    def by_partition(self) -> dict[int, int | None]:
        """Records behind per assigned input partition; None where no fetch has reported the
        partition's end yet."""
        lag: dict[int, int | None] = {}
        consumer = self._app.consumer
        for tp in consumer.assignment():
            if tp.topic != self._topic:
                continue
            highwater = consumer.highwater(tp)
            committed = internals.committed_offset(consumer, tp) or 0
            position = max(self._processed.get(tp.partition, 0), committed,
                           self._fetched.get(tp.partition, 0))
            lag[tp.partition] = None if highwater is None else max(0, highwater - position)
        return lag

    def known(self) -> dict[int, int]:
        """The partitions whose lag is known, for /metrics."""
        return {partition: lag for partition, lag in self.by_partition().items()
                if lag is not None}
