"""Where a topic's partitions end, for a reader of committed records: the log end, and the
offset after the last committed record.

The end is the high watermark a fetch response reports. ListOffsets(latest) alone is not
trusted for it: Tansu answers it with the newest batch's base offset + 1, short of the end.
Each function runs a consumer of its own, in no group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

# fetches of this long at most, this many times at most
_END_FETCH_WAIT_MS = 200
_END_FETCH_ROUNDS = 25


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


async def committed_counts(options: Mapping[str, Any], ends: Mapping[TopicPartition, int]
                           ) -> dict[TopicPartition, int]:
    """How many records a committed reader finds in each partition, read from its start up to
    its end in `ends` (`record_ends`): in a partition written in transactions, commit markers
    and aborted records hold offsets too, so offsets alone overcount."""
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
