"""The worker's sender against a real broker: every record lands, in order per partition,
without waiting for more records that will never come."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from stream.brokers import RunningBroker
from stream.kafka.admin import create_topics
from stream.kafka.producer import deliver_until_done

pytestmark = [pytest.mark.integration]

LINGER_MS = 60_000


@dataclass(frozen=True)
class Out:
    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] | None = None


async def read_all(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap,
                                auto_offset_reset="earliest")
    await consumer.start()
    received: list[tuple[int, bytes]] = []
    try:
        async with asyncio.timeout(30):
            while len(received) < count:
                batches = await consumer.getmany(timeout_ms=500)
                received += [(r.partition, r.value) for rs in batches.values() for r in rs]
    finally:
        await consumer.stop()
    return received


async def test_a_delivery_does_not_wait_for_the_producers_linger(broker: RunningBroker) -> None:
    topic = f"sender-{uuid.uuid4().hex[:8]}"
    create_topics(broker.bootstrap, [topic], partitions=2)
    # A producer that would hold an open batch for a minute in case more records came.
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=LINGER_MS,
                                max_batch_size=4096)
    await producer.start()
    # enough for several full batches in partition 0, and a last one that is not full
    records = [Out(topic, i % 2, b"k", f"value-{i:04d}-".encode() + b"x" * 200)
               for i in range(101)]
    try:
        async with asyncio.timeout(LINGER_MS / 1000 / 4):
            await deliver_until_done(producer, records, lambda record, error: None)
    finally:
        await producer.stop()
    received = await read_all(broker.bootstrap, topic, len(records))
    assert sorted(received) == sorted((r.partition, r.value) for r in records)
    for partition in (0, 1):
        assert [value for p, value in received if p == partition] == [
            r.value for r in records if r.partition == partition]
