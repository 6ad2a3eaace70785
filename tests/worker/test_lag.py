"""Lag as /metrics and the stall watch read it: counted from what was processed, the group's
commit or the fetch position, whichever is furthest, read when asked (no timer involved)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace

from faust.types import TP

from stream.worker.lag import Lag

TOPIC = "events"


@dataclass
class FakeConsumer:
    """Faust's consumer as Lag reads it: assignment, highwaters, fetch positions, commits."""

    highwaters: dict[int, int | None]
    positions: dict[int, int] = field(default_factory=dict)
    _committed_offset: dict[TP, int] = field(default_factory=dict)

    def assignment(self) -> set[TP]:
        return {TP(TOPIC, p) for p in self.highwaters} | {TP("other", 0)}

    def highwater(self, tp: TP) -> int | None:
        return self.highwaters[tp.partition]

    async def position(self, tp: TP) -> int:
        if tp.partition not in self.positions:
            await asyncio.sleep(10)  # no position yet: a rebalance under way
        return self.positions[tp.partition]


def lag_of(consumer: FakeConsumer, processed: dict[int, int]) -> Lag:
    return Lag(SimpleNamespace(consumer=consumer), TOPIC, processed)


async def test_a_partition_ending_in_a_marker_is_caught_up_once_positions_are_read() -> None:
    # offset 9 holds a transaction's commit marker: processing ends at 9, the fetch passed it
    consumer = FakeConsumer({0: 10}, positions={0: 10})
    lag = lag_of(consumer, {0: 9})
    assert lag.by_partition() == {0: 1}
    await lag.refresh()
    assert lag.by_partition() == {0: 0}


async def test_a_partition_not_processed_yet_counts_from_the_group_commit() -> None:
    consumer = FakeConsumer({0: 50, 1: None}, _committed_offset={TP(TOPIC, 0): 30})
    lag = lag_of(consumer, {})
    await asyncio.wait_for(lag.refresh(), 5)  # positions it cannot read are left out
    assert lag.by_partition() == {0: 20, 1: None}
    assert lag.known() == {0: 20}


async def test_processing_ahead_of_the_last_read_position_counts() -> None:
    consumer = FakeConsumer({0: 100}, positions={0: 40})
    processed = {0: 40}
    lag = lag_of(consumer, processed)
    await lag.refresh()
    processed[0] = 90  # the processor moves on between readings
    assert lag.known() == {0: 10}
