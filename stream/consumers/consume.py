"""The at-least-once consumer loop every sink runs under: fetch, write durably, commit, back
off, and with `--once` stop at the end; the mirror image of `stream.sources.publish.pump`.

Delivery is at least once: offsets are committed only after the sink's write is durable, so
after a crash, a rebalance or a broker that went away records come again. While the broker is
away the loop keeps asking for records and retries its commit (`stream.kafka.retry`); it goes on
by itself when the broker is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError

from stream.consumers.base import Sink
from stream.kafka.consumer import caught_up, fetch, make_consumer, topic_partitions
from stream.kafka.retry import Backoff, until_done
from stream.progress import Progress
from stream.settings import Settings

POLL_MS = 500
IDLE_TIMEOUT = 5.0  # --once: stop after this long without a record, should the end never show

log = logging.getLogger(__name__)


@dataclass
class RunStats:
    records: int = 0
    written: int = 0  # what the sink counts (its `counts`)


class _RevokeFromSink(ConsumerRebalanceListener):
    """Partitions may move to another member of the group: the sink lets go of them. The eager
    rebalance revokes before anyone is assigned, and the sink writes between polls only, so two
    members never write one partition's records at once."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.sink.revoke(list(revoked))

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        pass


async def consume(
    settings: Settings,
    topic: str,
    sink: Sink,
    group: str,
    *,
    follow: bool,
    idle_timeout: float = IDLE_TIMEOUT,
    stop: asyncio.Event | None = None,
    progress: Progress | None = None,
) -> RunStats:
    """Hand the records of `topic` to `sink` as a member of consumer group `group`, until
    `stop` is set.

    Without `follow`, returns once every assigned partition is read to its end. A group that
    has no committed offsets starts at the oldest record. `progress` counts what is written.
    """
    stop = stop or asyncio.Event()
    # Offsets are committed here, after the sink's write is durable.
    consumer = make_consumer(settings, group, auto_offset_reset="earliest")
    stats = RunStats()
    try:
        await consumer.start()
        await topic_partitions(consumer, [topic], wait=follow)
        consumer.subscribe([topic], listener=_RevokeFromSink(sink))
        loop = asyncio.get_running_loop()
        idle_since: float | None = None
        backoff = Backoff()
        while not stop.is_set():
            if progress is not None:
                progress.add()  # the line is due by the clock too, records or none
            batches = await fetch(consumer, POLL_MS, backoff, settings.bootstrap, log)
            if batches is None:
                continue  # nothing was written or committed for these: they come again
            if batches:
                records = sum(map(len, batches.values()))
                stats.records += records
                written = sink.write([record for batch in batches.values() for record in batch])
                stats.written += written
                # Only now, with the write durable, may the group forget these records.
                offsets = {tp: rs[-1].offset + 1 for tp, rs in batches.items()}
                await until_done(lambda: _commit(consumer, offsets),  # noqa: B023 - awaited
                                 f"committing the offsets of {group}",
                                 broker=settings.bootstrap)
                if progress is not None:
                    progress.add(**{sink.counts: written}, records=records)
                idle_since = loop.time()
            elif follow:
                continue
            elif not consumer.assignment():
                idle_since = None  # still joining the group, which can take seconds
            elif idle_since is None:
                idle_since = loop.time()
            elif (await caught_up(consumer, consumer.assignment())
                  or loop.time() - idle_since >= idle_timeout):
                return stats
        return stats
    finally:
        await consumer.stop()


async def _commit(consumer: AIOKafkaConsumer, offsets: dict[TopicPartition, int]) -> None:
    # CommitFailedError: a rebalance took the partitions first; their new owner reads these
    # records again, as at least once allows (the memory writer's index makes it harmless).
    with contextlib.suppress(CommitFailedError):
        await consumer.commit(offsets)
