"""A batch lane through Faust's consumer: one topic's records reach a handler per fetch.

Faust hands every record to its agents one at a time, and per record it starts four tasks
(`Service.wait_first`), builds an event, queues it and acks it through the stream: about
half of a worker's CPU went there. The lane takes the lane topic's records out of each fetch
as one batch and awaits the handler with them, inside the fetcher, so the next fetch waits
for the batch. Everything else stays Faust's: the consumer group and its assignment (the
topic is subscribed like any agent's and co-partitioned with the tables), table recovery
(changelog records still take Faust's path), and commits, which follow the acks the handler
gives once a batch is done. Records are tracked as in flight until then, so a rebalance or
a stop waits for the batch (`stream_wait_empty`) before partitions move or the final commit.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import faust
from aiokafka import AIOKafkaProducer
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, Message

LaneHandler = Callable[[list[Message]], Awaitable[None]]


class LaneApp(faust.App):
    """A Faust app whose consumer delivers the records of `lanes` topics in batches, with
    an aiokafka producer of its own for handlers that send whole batches (Faust's producer
    takes one record at a time)."""

    def __init__(self, *args: Any, make_producer: Callable[[], AIOKafkaProducer],
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lanes: dict[str, LaneHandler] = {}
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

    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)


class LaneConsumer(faust_aiokafka.Consumer):
    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Message]]:
        lanes: dict[str, LaneHandler] = self.app.lanes  # type: ignore[attr-defined]
        batches: dict[str, list[Message]] = {}
        # Faust's own rule for records after a seek: older than the read offset is old news.
        read_offset = self._read_offset
        async for tp, message in super().getmany(timeout):
            if tp.topic not in lanes:
                yield tp, message
                continue
            last = read_offset[tp]
            if last is not None and message.offset < last:
                continue
            read_offset[tp] = message.offset
            self._unacked_messages.add(message)
            batches.setdefault(tp.topic, []).append(message)
        if batches:
            # Faust stops a worker by cancelling the fetcher; a batch under way is finished
            # (outputs, state, acks), so the final commit covers it.
            await asyncio.shield(self._handle(lanes, batches))

    async def _handle(self, lanes: dict[str, LaneHandler],
                      batches: dict[str, list[Message]]) -> None:
        for topic, batch in batches.items():
            self._mark_inbound({m.tp for m in batch})
            await lanes[topic](batch)

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


class _Transport(faust_aiokafka.Transport):
    Consumer = LaneConsumer
