"""Changelog end offsets that Faust's table recovery can trust on every broker.

Tansu answers ListOffsets(latest) with "base offset of the newest batch + 1", not the log
end, so Faust stops recovering a table early and loses its newest updates. A fetch from
that offset carries the true high watermark; taking the larger of the two is correct on
Apache Kafka too, where both agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.types import TP

_FETCH_WAIT_MS = 200
_FETCH_ROUNDS = 25


async def fetched_highwaters(
    options: dict, listed: Mapping[TP, int]
) -> dict[TopicPartition, int]:
    wanted = {TopicPartition(tp.topic, tp.partition): end for tp, end in listed.items() if end}
    if not wanted:
        return {}
    consumer = AIOKafkaConsumer(
        **options, enable_auto_commit=False, max_partition_fetch_bytes=1024
    )
    await consumer.start()
    try:
        consumer.assign(list(wanted))
        for tp, end in wanted.items():
            consumer.seek(tp, end - 1)
        for _ in range(_FETCH_ROUNDS):
            await consumer.getmany(timeout_ms=_FETCH_WAIT_MS)
            if all(consumer.highwater(tp) is not None for tp in wanted):
                break
        return {tp: consumer.highwater(tp) or 0 for tp in wanted}
    finally:
        await consumer.stop()


def install(options: dict) -> None:
    """Make every Faust consumer in this process take the larger of the two end offsets."""

    async def _highwaters(self: AIOKafkaConsumerThread, partitions: Sequence[TP]):
        consumer = self._ensure_consumer()
        listed = await consumer.end_offsets(partitions)
        fetched = await fetched_highwaters(options, listed)
        return {
            tp: max(end, fetched.get(TopicPartition(tp.topic, tp.partition), 0))
            for tp, end in listed.items()
        }

    AIOKafkaConsumerThread._highwaters = _highwaters

