"""The lane's batch restore of changelog records: order, Faust's progress, what is passed on.

A real restart is tested end to end in tests/integration (test_restart_recovers_state) and
tests/chaos; these tests pin the ordering rules with Faust's recovery bookkeeping faked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from faust.types import TP

from stream.worker.lane import LaneConsumer

ACTIVE = TP("app-sessions-changelog", 0)
STANDBY = TP("app-sessions-changelog", 1)
OTHER = TP("app-other-changelog", 0)


class BatchLog(dict):
    """A memory store's dict that logs the offsets written into it, a list per batch (a
    record's value names its offset: `records`)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[int]] = []
        self.fresh = True

    def new_batch(self) -> None:
        self.fresh = True

    def __setitem__(self, key: bytes, value: bytes) -> None:
        if self.fresh:
            self.batches.append([])
            self.fresh = False
        self.batches[-1].append(int(value.lstrip(b"v")))
        super().__setitem__(key, value)


@dataclass
class FakeStore:
    data: BatchLog = field(default_factory=BatchLog)
    _key_partition: dict[bytes, int] = field(default_factory=dict)


@dataclass
class FakeTable:
    """A memory:// table: the restore writes into its store's dict and partition map."""

    data: FakeStore = field(default_factory=FakeStore)

    @property
    def batches(self) -> list[list[int]]:
        return self.data.data.batches


@dataclass
class FakeRecovery:
    table: FakeTable
    active_tps: set = field(default_factory=lambda: {ACTIVE})
    standby_tps: set = field(default_factory=lambda: {STANDBY})
    active_offsets: dict = field(default_factory=dict)
    standby_offsets: dict = field(default_factory=dict)
    buffered: list = field(default_factory=list)
    flushes: int = 0

    @property
    def tp_to_table(self) -> dict:
        return {ACTIVE: self.table, STANDBY: self.table}

    def flush_buffers(self) -> None:
        """Faust's recovery applies what it buffered as a batch of its own."""
        self.flushes += 1
        written = self.table.data.data
        written.new_batch()
        for event in self.buffered:
            written[event.key] = event.value
        self.buffered = []
        written.new_batch()

    def faust_takes(self, tp: TP, message) -> None:
        """What Faust's recovery does with a record passed on to it."""
        offsets = self.active_offsets if tp in self.active_tps else self.standby_offsets
        offsets[tp] = message.offset
        self.buffered.append(SimpleNamespace(key=message.key, value=message.value,
                                             message=message))


def consumer(recovery: FakeRecovery) -> LaneConsumer:
    lane = LaneConsumer.__new__(LaneConsumer)
    lane.app = SimpleNamespace(tables=SimpleNamespace(recovery=recovery))
    lane._passed_on = {}
    return lane


def records(tp: TP, offsets: range, prefix: str = "v") -> list:
    return [SimpleNamespace(tp=tp, offset=o, key=b"k%d" % (o % 3), value=f"{prefix}{o}".encode(),
                            partition=tp.partition) for o in offsets]


def test_a_fetch_is_applied_but_for_its_last_record_which_faust_takes():
    recovery = FakeRecovery(FakeTable())
    passed = consumer(recovery)._restore(ACTIVE, records(ACTIVE, range(0, 5)))
    assert [m.offset for m in passed] == [4]
    assert recovery.table.batches == [[0, 1, 2, 3]]
    assert recovery.active_offsets[ACTIVE] == 3  # Faust's next record is the passed-on one


def test_nothing_is_applied_ahead_of_a_record_faust_has_not_taken_yet():
    recovery = FakeRecovery(FakeTable())
    lane = consumer(recovery)
    lane._restore(ACTIVE, records(ACTIVE, range(0, 3)))
    passed = lane._restore(ACTIVE, records(ACTIVE, range(3, 6)))
    assert [m.offset for m in passed] == [3, 4, 5]  # all of them take Faust's path
    assert recovery.table.batches == [[0, 1]]


def test_faust_buffer_is_applied_first_so_the_newest_value_wins():
    recovery = FakeRecovery(FakeTable())
    lane = consumer(recovery)
    (first,) = lane._restore(ACTIVE, records(ACTIVE, range(0, 3)))
    recovery.faust_takes(ACTIVE, first)  # buffered by Faust, not applied yet
    (last,) = lane._restore(ACTIVE, records(ACTIVE, range(3, 7)))
    assert recovery.table.batches == [[0, 1], [2], [3, 4, 5]]
    recovery.faust_takes(ACTIVE, last)
    recovery.flush_buffers()
    # keys cycle k0 k1 k2: the table holds each key's value at its latest offset
    assert recovery.table.data.data == {b"k0": b"v6", b"k1": b"v4", b"k2": b"v5"}


def test_records_faust_has_seen_are_dropped():
    recovery = FakeRecovery(FakeTable(), active_offsets={ACTIVE: 4})
    passed = consumer(recovery)._restore(ACTIVE, records(ACTIVE, range(2, 8)))
    assert [m.offset for m in passed] == [7]
    assert recovery.table.batches == [[5, 6]]


def test_standby_partitions_are_restored_too():
    recovery = FakeRecovery(FakeTable())
    passed = consumer(recovery)._restore(STANDBY, records(STANDBY, range(0, 3)))
    assert [m.offset for m in passed] == [2]
    assert recovery.standby_offsets[STANDBY] == 1 and ACTIVE not in recovery.active_offsets


def test_untracked_partitions_and_single_records_are_left_to_faust():
    recovery = FakeRecovery(FakeTable())
    lane = consumer(recovery)
    assert [m.offset for m in lane._restore(OTHER, records(OTHER, range(0, 3)))] == [0, 1, 2]
    assert [m.offset for m in lane._restore(ACTIVE, records(ACTIVE, range(0, 1)))] == [0]
    assert recovery.table.batches == [] and recovery.flushes == 0


def test_a_fetch_is_restored_before_faust_takes_it_record_by_record():
    recovery = FakeRecovery(FakeTable())
    lane = consumer(recovery)
    checked: list[TP] = []
    app = SimpleNamespace(tables=lane.app.tables, restored_tables={ACTIVE.topic},
                          refuse_too_new=lambda tp, messages: checked.append(tp))
    lane.app = app
    lane._lane_app = lambda: app
    lane._buffered_partitions = set()
    lane_tp = TP("app-input", 0)
    fetch = {ACTIVE: records(ACTIVE, range(0, 5)), STANDBY: records(STANDBY, range(0, 3)),
             lane_tp: records(lane_tp, range(0, 3))}

    lane.restore_fetch(fetch, {ACTIVE, lane_tp})

    # applied at once but for the last, which Faust's own path takes
    assert recovery.table.batches == [[0, 1, 2, 3]]
    assert [m.offset for m in fetch[ACTIVE]] == [4]
    assert checked == [ACTIVE]
    # a partition Faust's loop would skip (not active, not buffered), and a lane topic's
    assert [m.offset for m in fetch[STANDBY]] == [0, 1, 2]
    assert [m.offset for m in fetch[lane_tp]] == [0, 1, 2]

    lane._buffered_partitions = {STANDBY}
    lane.restore_fetch(fetch, {ACTIVE, lane_tp})
    assert recovery.table.batches[-1] == [0, 1]
