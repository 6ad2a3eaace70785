"""Which input records the lane processes, when the consumer below it hands records on from
where its fetch position happens to be and Faust drops some of them (stream.worker.read_positions).

The consumer is faked: a log of offsets per partition, aiokafka's fetch position, and Faust's
getmany, which hands a fetch on and may drop the end of it, as it does when its flow stops or
its generation changes. The real group is tested in tests/chaos/test_group_chaos.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from stream.kafka import internals
from stream.worker.lane import LaneConsumer
from stream.worker.read_positions import ReadPositions

INPUT = "input"
P0, P1 = TP(INPUT, 0), TP(INPUT, 1)


@dataclass(eq=False)  # hashable, as a Faust message is
class Record:
    tp: TP
    topic: str
    partition: int
    offset: int


@dataclass
class Below:
    """The consumer under the lane: what each partition holds, the group's commits, and
    aiokafka's fetch positions (where a fetch starts)."""

    logs: dict[TP, list[int]]
    committed: dict[TP, int | None]
    fetch_at: dict[TP, int]
    per_fetch: int = 3
    # Faust hands on only the first `handed_on` records of a fetch (None: all of them)
    handed_on: Callable[[TP], int | None] = lambda tp: None
    seeks: list[dict[TP, int]] = field(default_factory=list)
    gaps: list[tuple[TP, int, int]] = field(default_factory=list)

    def fetch(self, tp: TP) -> list[Record]:
        start = self.fetch_at[tp]
        offsets = [o for o in self.logs[tp] if o >= start][:self.per_fetch]
        if offsets:
            self.fetch_at[tp] = offsets[-1] + 1
        return [Record(tp, tp.topic, tp.partition, o) for o in offsets]


def lane_over(below: Below, processed: list[tuple[int, int]]) -> LaneConsumer:
    lane = LaneConsumer.__new__(LaneConsumer)

    async def handle(batch) -> None:
        processed.extend((m.partition, m.offset) for m in batch)

    app = SimpleNamespace(lanes={INPUT: handle}, restored_tables=set(),
                          refuse_too_new=lambda tp, messages: None,
                          monitor=SimpleNamespace(stream_inbound_time={}))
    lane.app = app
    lane._lane_app = lambda: app
    lane._passed_on, lane._handed, lane._positions = {}, {}, ReadPositions()
    lane.lost, lane.given_up = set(), 0
    lane._unacked_messages = set()
    lane.flow_active, lane._below = True, below
    lane._stopped, lane._crashed = asyncio.Event(), asyncio.Event()  # should_stop: False
    lane.assignment = lambda: set(below.logs)

    async def seek_wait(partitions) -> None:
        below.seeks.append(dict(partitions))
        below.fetch_at.update(partitions)

    async def earliest_offsets(*tps):
        return {tp: below.logs[tp][0] if below.logs[tp] else 0 for tp in tps}

    async def add_gap(tp, first, last) -> None:
        below.gaps.append((tp, first, last))

    lane.seek_wait, lane.earliest_offsets, lane._add_gap = seek_wait, earliest_offsets, add_gap
    return lane


@pytest.fixture(autouse=True)
def faked_faust(monkeypatch):
    async def getmany(self, timeout):
        below: Below = self._below
        fetched = {tp: below.fetch(tp) for tp in below.logs}
        fetched = {tp: records for tp, records in fetched.items() if records}
        if fetched:
            self.take_fetch(fetched, set(fetched))
        for tp, records in fetched.items():
            kept = below.handed_on(tp)
            for record in records[:kept]:
                yield tp, record

    async def committed_offsets(consumer, tps):
        return {tp: consumer._below.committed.get(tp) for tp in tps}

    monkeypatch.setattr(faust_aiokafka.Consumer, "getmany", getmany)
    monkeypatch.setattr(internals, "committed_offsets", committed_offsets)


async def drive(lane: LaneConsumer, rounds: int) -> None:
    for _ in range(rounds):
        async for _tp, _message in lane.getmany(1.0):
            pass


def offsets_of(processed: list[tuple[int, int]], partition: int) -> list[int]:
    return [offset for p, offset in processed if p == partition]


async def test_a_partition_is_processed_from_its_committed_offset_not_from_the_fetch():
    # the fetch position ran ahead (records fetched during recovery) and behind
    below = Below(logs={P0: list(range(10)), P1: list(range(10))},
                  committed={P0: 4, P1: 2}, fetch_at={P0: 7, P1: 0})
    processed: list[tuple[int, int]] = []
    await drive(lane_over(below, processed), 8)
    assert offsets_of(processed, 0) == list(range(4, 10))
    assert offsets_of(processed, 1) == list(range(2, 10))


async def test_a_partition_without_a_commit_starts_at_its_earliest_record():
    # what aiokafka leaves a partition without a commit at: wherever its fetch was
    below = Below(logs={P0: list(range(3, 12))}, committed={P0: None}, fetch_at={P0: 9})
    processed: list[tuple[int, int]] = []
    await drive(lane_over(below, processed), 8)
    assert offsets_of(processed, 0) == list(range(3, 12))
    assert below.seeks[0] == {P0: 3}


async def test_records_faust_dropped_are_fetched_again_and_processed_once():
    below = Below(logs={P0: list(range(20))}, committed={P0: None}, fetch_at={P0: 0})
    drops = iter([None, 1, 0, None, 2])  # the fetches Faust cut short (1 and 0 records)
    below.handed_on = lambda tp: next(drops, None)
    processed: list[tuple[int, int]] = []
    await drive(lane_over(below, processed), 14)
    assert offsets_of(processed, 0) == list(range(20))


async def test_records_fetched_again_after_a_seek_back_are_not_processed_twice():
    below = Below(logs={P0: list(range(10))}, committed={P0: 0}, fetch_at={P0: 0})
    processed: list[tuple[int, int]] = []
    lane = lane_over(below, processed)
    await drive(lane, 3)
    below.fetch_at[P0] = 0  # Faust seeks back to the committed offset
    await drive(lane, 6)
    assert offsets_of(processed, 0) == list(range(10))


async def test_offsets_without_records_are_passed_as_gaps():
    # transaction markers at 3 and 7; retention removed 0 and 1 after the commit at 0
    below = Below(logs={P0: [2, 4, 5, 6, 8, 9]}, committed={P0: 0}, fetch_at={P0: 0})
    processed: list[tuple[int, int]] = []
    await drive(lane_over(below, processed), 6)
    assert offsets_of(processed, 0) == [2, 4, 5, 6, 8, 9]
    assert below.gaps == [(P0, 0, 1), (P0, 3, 3), (P0, 7, 7)]


async def test_a_revoked_partition_is_placed_afresh_when_it_comes_back():
    below = Below(logs={P0: list(range(10))}, committed={P0: 0}, fetch_at={P0: 0})
    processed: list[tuple[int, int]] = []
    lane = lane_over(below, processed)
    await drive(lane, 2)
    lane._positions.forget({P0})
    # another worker owned it meanwhile and committed up to 8; aiokafka kept its position
    below.committed[P0] = 8
    await drive(lane, 4)
    assert offsets_of(processed, 0) == [0, 1, 2, 8, 9]


async def test_nothing_is_processed_of_a_partition_no_longer_owned():
    below = Below(logs={P0: list(range(5)), P1: list(range(5))},
                  committed={P0: 0, P1: 0}, fetch_at={P0: 0, P1: 0})
    processed: list[tuple[int, int]] = []
    lane = lane_over(below, processed)
    lane.assignment = lambda: {P0}  # P1 was taken while its records were on their way
    await drive(lane, 4)
    assert offsets_of(processed, 0) == [0, 1, 2, 3, 4]
    assert offsets_of(processed, 1) == []


async def test_a_partition_given_up_is_neither_processed_nor_placed_again():
    """Exactly once, a partition whose transactions are fenced is given up until the next
    assignment (stream.worker.fencing): its records are skipped, not sought back to."""
    below = Below(logs={P0: list(range(9)), P1: list(range(9))},
                  committed={P0: 0, P1: 0}, fetch_at={P0: 0, P1: 0})
    processed: list[tuple[int, int]] = []
    lane = lane_over(below, processed)
    rejoins: list[str] = []
    lane.pause_partitions = lambda tps: None
    lane.app.rebalancing = False

    async def request_rejoin(consumer) -> None:
        rejoins.append("rejoin")

    await drive(lane, 2)  # placed, then 3 records of each
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(internals, "request_rejoin", request_rejoin)
        await lane.lose({1})
    seeks = len(below.seeks)
    await drive(lane, 3)
    assert offsets_of(processed, 0) == list(range(9))
    assert offsets_of(processed, 1) == [0, 1, 2]
    assert len(below.seeks) == seeks and rejoins == ["rejoin"] and lane.given_up == 1


def test_positions_step_by_step():
    positions: ReadPositions[str] = ReadPositions()
    assert positions.advance("a", 5) is None  # not placed: the caller places it
    positions.place("a", 5)
    assert positions.advance("a", 4) == 5  # old: the position stays
    assert positions.get("a") == 5
    assert positions.advance("a", 5) == 5 and positions.get("a") == 6
    assert positions.advance("a", 9) == 6 and positions.get("a") == 10  # after a gap
    assert positions.untaken({"a": 9, "b": 3}) == []  # b is not placed
    assert positions.untaken({"a": 12}) == ["a"]
    positions.keep_only({"b"})
    assert positions.get("a") is None
