"""The consumers of the project's own tools (tail, the memory writer, dev): how they are made,
how they wait for a topic, and where a topic ends.

They read committed records only: what a worker's transaction aborted (exactly once,
stream.worker.exactly_once) is never read, and what it has not committed yet is read once it
is. The end is the high watermark a fetch response reports. ListOffsets(latest) alone is not
trusted for it: Tansu answers it with the newest batch's base offset + 1, short of the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from stream.kafka import internals
from stream.kafka.configuration import REQUEST_TIMEOUT_MS, client_options
from stream.settings import Settings

# Apache Kafka lists a topic only once its leaders are elected, a moment after creation.
METADATA_GRACE = 3.0
# log_end_offsets: fetches of this long at most, this many times at most
_END_FETCH_WAIT_MS = 200
_END_FETCH_ROUNDS = 25


class TopicMissing(LookupError):
    """The topic to read does not exist (yet)."""


def cannot_read(settings: Settings, topic: str, error: Exception) -> str:
    """The one line a tool prints when its topic or the broker is not there."""
    return (f"session-stream: cannot read {topic} from the Kafka broker at "
            f"{settings.bootstrap}: {error}")


def make_consumer(settings: Settings, group: str | None = None, **options: Any) -> AIOKafkaConsumer:
    """A consumer that commits only when told to; in `group`, with the settings' session
    timeout, else assigning partitions itself (taking none from the worker's group)."""
    if group is not None:
        options.setdefault("session_timeout_ms", int(settings.session_timeout * 1000))
        options.setdefault("heartbeat_interval_ms",
                           int(min(1.0, settings.session_timeout / 5) * 1000))
    return AIOKafkaConsumer(
        **client_options(settings),
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        **options,
    )


async def topic_partitions(consumer: AIOKafkaConsumer, topics: list[str], *, wait: bool,
                           grace: float = METADATA_GRACE) -> list[TopicPartition]:
    """Every partition of `topics`. With `wait`, until they all exist; else a topic still
    missing after `grace` seconds raises TopicMissing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while True:
        await internals.refresh_metadata(consumer)
        found = {topic: consumer.partitions_for_topic(topic) for topic in topics}
        missing = [topic for topic, numbers in found.items() if not numbers]
        if not missing:
            return [TopicPartition(t, n) for t in topics for n in sorted(found[t] or ())]
        if not wait and loop.time() >= deadline:
            raise TopicMissing(f"topic {missing[0]!r} does not exist")
        await asyncio.sleep(0.5)


async def caught_up(consumer: AIOKafkaConsumer, partitions: Iterable[TopicPartition]) -> bool:
    """Every partition is read up to what its latest fetch said a committed reader can read:
    the last stable offset, short of an open transaction's first record, else the high
    watermark (False while a partition has not been fetched yet)."""
    for partition in partitions:
        end = consumer.last_stable_offset(partition)
        if end is None:
            end = consumer.highwater(partition)
        if end is None or await consumer.position(partition) < end:
            return False
    return True


async def record_ends(options: Mapping[str, Any],
                      partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """Where a committed reader of each partition finds no more records: the offset after its
    last committed record (the partition's first offset when it has none).

    That is the log end, but for a partition written in transactions: there a commit marker
    takes the offset after a transaction's last record, and the records of an aborted one are
    never read, so the last record lies short of the end. Looked for backwards from the end, a
    window widened eightfold at a time."""
    ends = await log_end_offsets(options, partitions)
    looking = [tp for tp, end in ends.items() if end > 0]
    if not looking:
        return ends
    consumer = AIOKafkaConsumer(**options, enable_auto_commit=False,
                                isolation_level="read_committed")
    await consumer.start()
    try:
        starts = await consumer.beginning_offsets(looking)
        found: dict[TopicPartition, int] = {}
        window = 1
        consumer.assign(looking)
        while looking:
            for tp in looking:
                consumer.seek(tp, max(starts[tp], ends[tp] - window))
            last = await _last_records(consumer, looking, ends)
            found.update({tp: offset + 1 for tp, offset in last.items()})
            looking = [tp for tp in looking
                       if tp not in found and ends[tp] - window > starts[tp]]
            window *= 8
        return {tp: found.get(tp, starts.get(tp, end)) for tp, end in ends.items()}
    finally:
        await consumer.stop()


async def committed_counts(options: Mapping[str, Any],
                           partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """How many records a committed reader finds in each partition, read from its start: in a
    partition written in transactions, commit markers and aborted records hold offsets too, so
    offsets alone overcount."""
    ends = await record_ends(options, partitions)
    counts = dict.fromkeys(ends, 0)
    consumer = AIOKafkaConsumer(**options, enable_auto_commit=False,
                                isolation_level="read_committed")
    await consumer.start()
    try:
        starts = await consumer.beginning_offsets(list(ends)) if ends else {}
        reading = [tp for tp in ends if ends[tp] > starts[tp]]
        if reading:
            consumer.assign(reading)
            await consumer.seek_to_beginning(*reading)
        while reading:
            for tp, records in (await consumer.getmany(*reading, timeout_ms=500)).items():
                counts[tp] += sum(1 for record in records if record.offset < ends[tp])
            reading = [tp for tp in reading if await consumer.position(tp) < ends[tp]]
        return counts
    finally:
        await consumer.stop()


async def _last_records(consumer: AIOKafkaConsumer, partitions: list[TopicPartition],
                        ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The offset of the last record each partition yields from its position up to its end
    (or its last stable offset, short of an open transaction)."""
    last: dict[TopicPartition, int] = {}
    reading = set(partitions)
    for _ in range(_END_FETCH_ROUNDS):
        fetched = await consumer.getmany(*reading, timeout_ms=_END_FETCH_WAIT_MS)
        for tp, records in fetched.items():
            if records:
                last[tp] = records[-1].offset
        for tp in list(reading):
            stable = consumer.last_stable_offset(tp)
            end = ends[tp] if stable is None else min(stable, ends[tp])
            if await consumer.position(tp) >= end:
                reading.discard(tp)
        if not reading:
            break
    return last


async def log_end_offsets(options: Mapping[str, Any],
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """Where each partition ends: ListOffsets(latest), or the high watermark of a fetch from
    just below it where that lies further (on Tansu). A consumer of its own, in no group."""
    consumer = AIOKafkaConsumer(**options, enable_auto_commit=False,
                                max_partition_fetch_bytes=1024)
    await consumer.start()
    try:
        wanted = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
        listed = await consumer.end_offsets(wanted)
        non_empty = [tp for tp in wanted if listed[tp]]
        if non_empty:
            consumer.assign(non_empty)
            for tp in non_empty:
                consumer.seek(tp, listed[tp] - 1)
            for _ in range(_END_FETCH_ROUNDS):
                await consumer.getmany(timeout_ms=_END_FETCH_WAIT_MS)
                if all(consumer.highwater(tp) is not None for tp in non_empty):
                    break
        fetched = {tp: consumer.highwater(tp) or 0 for tp in non_empty}
        return {tp: max(listed[tp], fetched.get(tp, 0)) for tp in wanted}
    finally:
        await consumer.stop()
