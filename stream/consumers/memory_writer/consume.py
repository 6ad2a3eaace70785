"""The consumer group that feeds the memory files, committing only what is durable.

Delivery is at least once: offsets are committed only after the files are durable, so after a
crash, a rebalance or a broker that went away records come again. While the broker is away the
writer keeps asking for records and retries its commit (`stream.kafka.retry`); it goes on by
itself when the broker is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

from stream.consumers.memory_writer.files import MemoryWriter
from stream.kafka.consumer import caught_up, make_consumer, topic_partitions
from stream.kafka.retry import Backoff, curable, until_done
from stream.progress import Progress
from stream.settings import Settings

POLL_MS = 500
IDLE_TIMEOUT = 5.0  # --once: stop after this long without a record, should the end never show

log = logging.getLogger(__name__)


@dataclass
class RunStats:
    records: int = 0
    lines: int = 0


class _ForgetOnRevoke(ConsumerRebalanceListener):
    """Partitions (so sessions) may move to another writer sharing the directory: reload them
    from disk when they come back. The eager rebalance revokes before anyone is assigned, and
    this writer writes between polls only, so two writers never append to one session at once.
    """

    def __init__(self, writer: MemoryWriter) -> None:
        self.writer = writer

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.writer.forget()

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        pass


async def consume(
    settings: Settings,
    topic: str,
    writer: MemoryWriter,
    group: str,
    *,
    follow: bool,
    idle_timeout: float = IDLE_TIMEOUT,
    stop: asyncio.Event | None = None,
    progress: Progress | None = None,
) -> RunStats:
    """Write the records of `topic` as a member of consumer group `group`, until `stop` is set.

    Without `follow`, returns once every assigned partition is read to its end. A group that
    has no committed offsets starts at the oldest record. `progress` counts what is written.
    """
    stop = stop or asyncio.Event()
    # Offsets are committed here, after the files are durable.
    consumer = make_consumer(settings, group, auto_offset_reset="earliest")
    stats = RunStats()
    try:
        await consumer.start()
        await topic_partitions(consumer, [topic], wait=follow)
        consumer.subscribe([topic], listener=_ForgetOnRevoke(writer))
        loop = asyncio.get_running_loop()
        idle_since: float | None = None
        backoff = Backoff()
        while not stop.is_set():
            if progress is not None:
                progress.add()  # the line is due by the clock too, records or none
            try:
                batches = await consumer.getmany(timeout_ms=POLL_MS)
            except KafkaError as error:
                # Nothing was written or committed for these: they come again.
                if not curable(error):
                    raise
                delay = backoff.next()
                log.warning("fetching from %s failed (%s); retrying in %.1fs",
                            settings.bootstrap, error, delay)
                await asyncio.sleep(delay)
                continue
            backoff.reset()
            if batches:
                records = sum(map(len, batches.values()))
                stats.records += records
                # A session's records share a key, hence a partition, and come in order.
                # The headers carry what the source knew of the session (its key, agent, the
                # session it follows), for the file's header.
                lines = writer.write(
                    (record.key.decode("utf-8", "replace"), record.value,
                     tuple(record.headers or ()))
                    for records in batches.values()
                    for record in records
                    if record.key is not None and record.value is not None
                )
                stats.lines += lines
                # Only now, with the lines durable, may the group forget these records.
                offsets = {tp: rs[-1].offset + 1 for tp, rs in batches.items()}
                await until_done(lambda: _commit(consumer, offsets),  # noqa: B023 - awaited
                                 "committing the memory writer's offsets",
                                 broker=settings.bootstrap)
                if progress is not None:
                    progress.add(lines=lines, records=records)
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
    # records again, which the index makes harmless.
    with contextlib.suppress(CommitFailedError):
        await consumer.commit(offsets)
