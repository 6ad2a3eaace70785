"""A batch lane through Faust's consumer: one topic's records reach a handler per fetch.

Faust hands every record to its agents one at a time, and per record it starts four tasks
(`Service.wait_first`), builds an event, queues it and acks it through the stream, which
costs more than the cleaning itself (docs/performance.md). The lane takes the lane topic's
records out of each fetch as one batch and awaits the handler with them inside the fetcher.
Everything else stays Faust's: the consumer group and its assignment (the topic is subscribed
like any agent's and co-partitioned with the tables), table recovery, and commits, which
follow the acks the handler gives once a batch is delivered (possibly after it returned).
Records are tracked as in flight until acked, so a rebalance or a stop waits for them
(`stream_wait_empty`) before partitions move or the final commit.

Changelog records of the tables named with `restore_in_batches` are applied a fetch at a
time too (`LaneConsumer._restore`); Faust's recovery still decides what to read and when
it is done. Every changelog record is checked for a state format this version reads first
(`LaneApp.refuse_too_new`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import faust
from aiokafka import AIOKafkaProducer
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, Message

from stream.formats import EXIT_CODE, FormatTooNew
from stream.kafka import internals
from stream.worker import codec

LaneHandler = Callable[[list[Message]], Awaitable[None]]

FETCH_MAX_WAIT_MS = 100


class LaneApp(faust.App):
    """A Faust app whose consumer delivers the records of `lanes` topics in batches, with
    an aiokafka producer of its own for handlers that send whole batches (Faust's producer
    takes one record at a time)."""

    def __init__(self, *args: Any, make_producer: Callable[[], AIOKafkaProducer],
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lanes: dict[str, LaneHandler] = {}
        self.restored_tables: set[str] = set()
        self._make_producer = make_producer
        self._batch_producer: AIOKafkaProducer | None = None

    @property
    def batch_producer(self) -> AIOKafkaProducer:
        if self._batch_producer is None:
            raise RuntimeError("the app has not started")
        return self._batch_producer

    async def on_start(self) -> None:
        # before the consumer starts, so a lane handler always finds the producer running
        await super().on_start()
        self._batch_producer = self._make_producer()
        await self._batch_producer.start()

    async def on_stop(self) -> None:
        await super().on_stop()
        if self._batch_producer is not None:
            await self._batch_producer.stop()
            self._batch_producer = None

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
            print(f"session-stream worker: {error}", file=sys.stderr, flush=True)
            logging.shutdown()
            os._exit(EXIT_CODE)

    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)


class LaneConsumer(faust_aiokafka.Consumer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # per changelog partition, the offset of the last record left to Faust's recovery
        self._passed_on: dict[TP, int] = {}

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Message]]:
        lanes: dict[str, LaneHandler] = self.app.lanes  # type: ignore[attr-defined]
        batches: dict[str, list[Message]] = {}
        # Faust's own rule for records after a seek: older than the read offset is old news.
        read_offset = internals.read_offsets(self)
        unacked = internals.unacked_messages(self)
        restoring: dict[TP, list[Message]] = {}
        restored_tables = self.app.restored_tables  # type: ignore[attr-defined]
        async for tp, message in super().getmany(timeout):
            if tp.topic not in lanes:
                if tp.topic in restored_tables:
                    restoring.setdefault(tp, []).append(message)
                else:
                    yield tp, message
                continue
            last = read_offset[tp]
            if last is not None and message.offset < last:
                continue
            if last is not None and message.offset > last + 1:
                # Offsets never delivered (transaction markers, compacted records): without
                # them marked as gaps, as Faust's own fetch loop does, Faust's commits advance
                # one run of consecutive offsets per commit and fall ever further behind.
                await internals.add_gap(self, tp, last + 1, message.offset - 1)
            read_offset[tp] = message.offset
            unacked.add(message)
            batches.setdefault(tp.topic, []).append(message)
        for tp, messages in restoring.items():
            self.app.refuse_too_new(tp, messages)  # type: ignore[attr-defined]
            for message in self._restore(tp, messages):
                yield tp, message
        if batches:
            # Faust stops a worker by cancelling the fetcher; a batch under way is finished
            # (outputs, state, acks), so the final commit covers it.
            await asyncio.shield(self._handle(lanes, batches))

    async def _handle(self, lanes: dict[str, LaneHandler],
                      batches: dict[str, list[Message]]) -> None:
        for topic, batch in batches.items():
            self._mark_inbound({m.tp for m in batch})
            await lanes[topic](batch)

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
        recovery = self.app.tables.recovery
        if tp in recovery.active_tps:
            offsets = recovery.active_offsets
        elif tp in recovery.standby_tps:
            offsets = recovery.standby_offsets
        else:
            return messages
        seen = offsets.get(tp)
        passed_on = self._passed_on.get(tp)
        behind = passed_on is not None and (seen is None or seen < passed_on)
        fresh = [m for m in messages if seen is None or m.offset > seen]
        if behind or len(fresh) < 2:
            passed = fresh
        else:
            recovery.flush_buffers()
            recovery.tp_to_table[tp].apply_changelog_batch([_Change(m) for m in fresh[:-1]])
            offsets[tp] = fresh[-2].offset
            passed = fresh[-1:]
        if passed:
            self._passed_on[tp] = passed[-1].offset
        return passed

    def ack_all(self, messages: list[Message]) -> None:
        ack = self.ack
        for message in messages:
            ack(message)

    def _mark_inbound(self, tps: set[TP]) -> None:
        # Faust's slow-processing checks read when a stream last took a record of a partition.
        inbound = self.app.monitor.stream_inbound_time
        now = time.monotonic()
        for tp in tps:
            inbound[tp] = now


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # Faust asks brokers to hold a fetch up to 1.5 s for new data, and aiokafka sends a
        # broker no fetch while one is in flight: one partition at its end (an idle session,
        # a small partition) then held every other partition on that broker for 1.5 s per
        # round. Brokers still answer at once when data is there.
        internals.set_fetch_max_wait(consumer, FETCH_MAX_WAIT_MS)
        return consumer


class _Change:
    """What a table's `apply_changelog_batch` reads of a changelog event."""

    __slots__ = ("key", "message", "value")

    def __init__(self, message: Message) -> None:
        self.key = message.key
        self.value = message.value
        self.message = message


class _Transport(faust_aiokafka.Transport):
    Consumer = LaneConsumer
