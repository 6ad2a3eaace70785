"""A batch lane through Faust's consumer: one topic's records reach a handler per fetch.

Faust hands every record to its agents one at a time, and per record it starts four tasks
(`Service.wait_first`), builds an event, queues it and acks it through the stream, which
costs more than the cleaning itself (docs/performance.md). The lane takes the lane topic's
records out of each fetch as one batch and awaits the handler with them inside the fetcher.
Everything else stays Faust's: the consumer group and its assignment (the topic is subscribed
like any agent's and co-partitioned with the tables), table recovery, and, at least once,
offset commits, which follow the acks the app's `Committer` (stream.worker.commit) gives,
possibly after the handler returned. Exactly once, the app's delivery commits the input offsets
in its transactions and Faust's consumer commits none (`offsets_in_transactions`); its
bookkeeping still follows the acks, which come after the transactions committed. Records are
tracked as in flight until acked (or let go), so a rebalance or a stop waits for them
(`stream_wait_empty`) before partitions move or the final commit. The delivery learns of
each assignment before anything of it is read (`Delivery.assigned`: exactly once, the
partitions' producers fence their previous owners there), and of its end once the batches in
delivery are committed.

Changelog records of the tables named with `restore_in_batches` are applied a fetch at a
time too (`LaneConsumer._restore`); Faust's recovery still decides what to read and when
it is done. Every changelog record is checked first for a state format this version reads
(`LaneApp.refuse_too_new`).

What of Faust's machinery this needs (its consumer's offsets and acks bookkeeping, the hooks
where the consumer is made, its recovery's progress) is reached through
stream.kafka.internals only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import faust
from aiokafka.errors import KafkaError
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, Message

from stream.formats import EXIT_CODE, FormatTooNew
from stream.kafka import internals
from stream.worker import codec
from stream.worker.commit import Acknowledger, Committer, Delivery
from stream.worker.read_positions import ReadPositions

LaneHandler = Callable[[list[Message]], Awaitable[None]]

FETCH_MAX_WAIT_MS = 100

log = logging.getLogger(__name__)


MakeCommitter = Callable[[Acknowledger], Committer]


class LaneApp(faust.App):
    """A Faust app whose consumer delivers the records of `lanes` topics in batches, and
    whose `committer` commits them, through a `delivery` with producers of its own that send
    whole batches (Faust's producer takes one record at a time), and the consumer's acks."""

    def __init__(self, *args: Any, delivery: Delivery, make_committer: MakeCommitter,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lanes: dict[str, LaneHandler] = {}
        self.restored_tables: set[str] = set()
        self.delivery = delivery
        self._make_committer = make_committer
        self._committer: Committer | None = None
        # through Faust's public setter, before anything asks the app for its transport
        self.transport = internals.lane_transport(LaneConsumer, FETCH_MAX_WAIT_MS)(
            self.conf.broker_consumer, self)

    @property
    def committer(self) -> Committer:
        if self._committer is None:
            raise RuntimeError("the app has not started")
        return self._committer

    @property
    def lane_consumer(self) -> LaneConsumer:
        consumer = self.consumer
        if not isinstance(consumer, LaneConsumer):
            raise TypeError(f"the lane's transport makes LaneConsumers, not {type(consumer)}")
        return consumer

    async def on_start(self) -> None:
        # before the consumer starts, so a lane handler always finds the committer running
        await super().on_start()
        await self.delivery.start()
        self._committer = self._make_committer(self.lane_consumer)

    async def on_stop(self) -> None:
        await super().on_stop()
        if self._committer is not None:
            await self.delivery.stop()
            self._committer = None

    def lane(self, topic: faust.TopicT, handler: LaneHandler) -> None:
        self.topics.add(topic)
        for name in topic.topics:
            self.lanes[name] = handler

    def restore_in_batches(self, table: faust.Table) -> None:
        """Recover `table` a fetch at a time. Only for tables with raw keys and values and
        no changelog callbacks: records are applied to the store as they are."""
        self.restored_tables.add(table.changelog_topic_name)

    def refuse_too_new(self, tp: TP, messages: list[Message]) -> None:
        """Stop the worker (exit code 4, one line) on a changelog record of a state format
        newer than this version reads: read as absent, as an unreadable value is, it would
        drop nothing its history proves and alert anew."""
        where = f"{tp.topic} partition {tp.partition}"
        try:
            for message in messages:
                if message.value is not None:
                    codec.check(message.value, where)
        except FormatTooNew as error:
            # sys.stderr is Faust's logging proxy by now, which would prefix the line
            print(f"session-stream worker: {error}", file=sys.__stderr__, flush=True)
            logging.shutdown()
            os._exit(EXIT_CODE)


class LaneConsumer(faust_aiokafka.Consumer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # per changelog partition, the offset of the last record left to Faust's recovery
        self._passed_on: dict[TP, int] = {}
        self._positions: ReadPositions[TP] = ReadPositions()
        # per input partition, the offset of the last record the consumer handed on in the
        # current fetch
        self._handed: dict[TP, int] = {}
        # input partitions given up until the next assignment (stream.worker.fencing), and
        # how many times one was
        self.lost: set[TP] = set()
        self.given_up = 0

    def _lane_app(self) -> LaneApp:
        app = self.app
        if not isinstance(app, LaneApp):
            raise TypeError(f"a LaneConsumer serves a LaneApp, not {type(app)}")
        return app

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Message]]:
        app = self._lane_app()
        lanes = app.lanes
        batches: dict[str, list[Message]] = {}
        positions = self._positions
        unplaced: set[TP] = set()
        unacked = internals.unacked_messages(self)
        restoring: dict[TP, list[Message]] = {}
        restored_tables = app.restored_tables
        self._handed = {}
        lost = self.lost
        async for tp, message in super().getmany(timeout):
            if tp.topic not in lanes:
                if tp.topic in restored_tables:
                    restoring.setdefault(tp, []).append(message)
                else:
                    yield tp, message
                continue
            if tp in lost:
                continue
            position = positions.advance(tp, message.offset)
            if position is None:
                unplaced.add(tp)
                continue
            if message.offset < position:
                continue
            if message.offset > position:
                # Offsets that hold no record (transaction markers, records retention
                # removed): without them marked as gaps, as Faust's own fetch loop does,
                # Faust's commits advance one run of consecutive offsets per commit and fall
                # ever further behind.
                await internals.add_gap(self, tp, position, message.offset - 1)
            unacked.add(message)
            batches.setdefault(tp.topic, []).append(message)
        for tp, messages in restoring.items():
            app.refuse_too_new(tp, messages)
            for message in self._restore(tp, messages):
                yield tp, message
        if batches:
            # Faust stops a worker by cancelling the fetcher; a batch under way is finished
            # (outputs, state, acks), so the final commit covers it.
            await asyncio.shield(self._handle(lanes, batches))
        astray = unplaced.union(positions.untaken(self._handed))
        if astray and not self.should_stop:
            await self._place(astray)

    async def _place(self, tps: set[TP]) -> None:
        """Seek each of `tps` to the lane's position, taking one first where it has none in
        this assignment: the committed offset, else the partition's earliest
        (stream.worker.read_positions)."""
        positions = self._positions
        owned = self.assignment()
        tps = {tp for tp in tps if tp in owned}
        try:
            new = [tp for tp in tps if positions.get(tp) is None]
            if new:
                committed = await internals.committed_offsets(self, new)
                uncommitted = [tp for tp in new if committed[tp] is None]
                earliest = await self.earliest_offsets(*uncommitted) if uncommitted else {}
                for tp in new:
                    start = committed[tp]
                    positions.place(tp, start if start is not None else earliest[tp])
            await self.seek_wait({tp: offset for tp in tps
                                  if (offset := positions.get(tp)) is not None})
        except (TimeoutError, KafkaError) as error:
            # placed afresh when their records come again
            positions.forget(tps)
            log.warning("could not place input partitions %s: %r", sorted(tps), error)

    def take_fetch(self, records: dict[TP, list[Any]], active: set[TP] | None) -> None:
        """What the consumer handed on: the last offset of each lane partition (`_place`
        seeks back where they did not all reach the lane), and the changelog records of the
        tables restored in batches (`restore_fetch`)."""
        lanes = self._lane_app().lanes
        for tp, fetched in records.items():
            if tp.topic in lanes and fetched and tp not in self.lost:
                self._handed[tp] = fetched[-1].offset
        if self.flow_active and not self.should_stop:
            self.restore_fetch(records, active)

    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        self._positions.forget(revoked)
        await super().on_partitions_revoked(revoked)  # waits for the batches in delivery
        await self._lane_app().delivery.revoked()

    async def on_partitions_assigned(self, assigned: set[TP], generation_id: int = 0) -> None:
        self._positions.keep_only(assigned)
        self.lost.clear()
        lanes = self._lane_app().lanes
        # before Faust's recovery reads the changelogs and the lane the committed offsets
        await self._lane_app().delivery.assigned(
            {tp.partition for tp in assigned if tp.topic in lanes})
        await super().on_partitions_assigned(assigned, generation_id)

    def offsets_in_transactions(self) -> bool:
        """Whether the delivery's transactions commit the input offsets, and Faust must not."""
        return self._lane_app().delivery.offsets_in_transactions

    async def lose(self, partitions: set[int]) -> None:
        """Give up these input partitions until the next assignment: their records are neither
        fetched nor processed here, and the consumer rejoins its group for an assignment the
        broker's fence agrees with."""
        lanes = self._lane_app().lanes
        tps = {tp for tp in self.assignment() if tp.topic in lanes and tp.partition in partitions}
        self.lost |= tps
        self.given_up += len(tps)
        self._positions.forget(tps)
        self.pause_partitions(tps)
        if not self.app.rebalancing:  # a rejoin under way brings the new assignment anyway
            await internals.request_rejoin(self)

    async def _handle(self, lanes: dict[str, LaneHandler],
                      batches: dict[str, list[Message]]) -> None:
        for topic, batch in batches.items():
            # Faust's slow-processing checks read when a stream last took a record
            internals.mark_inbound(self.app, {m.tp for m in batch}, time.monotonic())
            await lanes[topic](batch)

    def restore_fetch(self, records: dict[TP, list[Any]], active: set[TP] | None) -> None:
        """Apply a fetch's changelog records of the tables restored in batches (`_restore`)
        before Faust's fetch loop sees them, leaving it the last of each partition's.

        That loop makes a Message of every record and asks for its partition's highwater on
        the way, which was most of a restart's time with a million sessions (two changelog
        records each; docs/performance.md). The partitions it skips, it skips here too.
        """
        app = self._lane_app()
        for tp, fetched in list(records.items()):
            if tp.topic not in app.restored_tables or len(fetched) < 2:
                continue
            if active is not None and tp not in active and not internals.buffered(self, tp):
                continue
            app.refuse_too_new(tp, fetched)
            records[tp] = self._restore(tp, fetched)

    def _restore(self, tp: TP, messages: list[Message]) -> list[Message]:
        """Apply a fetch of changelog records to their table at once, but for the last,
        which is returned to take Faust's path, so Faust's recovery sees the partition's
        progress (and its end) as if it had applied them all itself.

        Faust applies changelog records one event at a time (two tasks, a queue and its
        bookkeeping each), which made a restart with many sessions slow.
        Records apply in offset order: a fetch is applied here only once Faust has taken
        the record passed on before it (its offset for the partition has reached it), and
        after Faust's own buffers were applied.
        """
        offsets = internals.recovery_offsets(self.app, tp)
        if offsets is None:
            return messages
        seen = offsets.get(tp)
        passed_on = self._passed_on.get(tp)
        behind = passed_on is not None and (seen is None or seen < passed_on)
        fresh = [m for m in messages if seen is None or m.offset > seen]
        if behind or len(fresh) < 2:
            passed = fresh
        else:
            internals.apply_changelog(self.app, tp, fresh[:-1])
            offsets[tp] = fresh[-2].offset
            passed = fresh[-1:]
        if passed:
            self._passed_on[tp] = passed[-1].offset
        return passed

    def ack_all(self, messages: Sequence[Message]) -> None:
        ack = self.ack
        for message in messages:
            ack(message)

    def let_go(self, messages: Sequence[Message]) -> None:
        unacked = internals.unacked_messages(self)
        for message in messages:
            unacked.discard(message)
