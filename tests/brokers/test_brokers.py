"""The local brokers start, carry keyed records end to end, and go away on stop()."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from stream.brokers import RunningBroker, start_broker
from stream.brokers.local import port_is_open
from stream.kafka.admin import create_topics

SELECTED_BROKER = os.environ.get("SESSION_STREAM_TEST_BROKER", "tansu")
TOPIC = "broker-smoke"
PARTITIONS = 4
RECORDS = {f"key-{i}".encode(): f'{{"n": {i}}}'.encode() for i in range(10)}


@pytest.fixture(params=[SELECTED_BROKER])
def broker(request: pytest.FixtureRequest) -> Iterator[RunningBroker]:
    running = start_broker(request.param)
    try:
        yield running
    finally:
        running.stop()


async def produce(bootstrap: str, records: dict[bytes, bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for key, value in records.items():
            await producer.send(TOPIC, value=value, key=key)
        await producer.flush()
    finally:
        await producer.stop()


async def consume(
    bootstrap: str, count: int, timeout: float = 30.0
) -> list[tuple[int, bytes, bytes]]:
    """(partition, key, value) of the first `count` records, read without a group."""
    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    received: list[tuple[int, bytes, bytes]] = []
    try:
        async with asyncio.timeout(timeout):
            while len(received) < count:
                batches = await consumer.getmany(timeout_ms=500)
                received += [(r.partition, r.key, r.value) for rs in batches.values() for r in rs]
    finally:
        await consumer.stop()
    return received


@pytest.mark.integration
@pytest.mark.asyncio
async def test_keyed_records_round_trip_and_stop_closes_port(broker: RunningBroker) -> None:
    assert broker.url == f"kafka://{broker.bootstrap}"
    create_topics(broker.bootstrap, {TOPIC: PARTITIONS})
    create_topics(broker.bootstrap, {TOPIC: PARTITIONS})  # a duplicate is not an error

    await produce(broker.bootstrap, RECORDS)
    received = await consume(broker.bootstrap, len(RECORDS))

    assert {key: value for _, key, value in received} == RECORDS
    assert len(received) == len(RECORDS)
    # Ten keys hashed over four partitions: more than one in use proves the count took.
    assert {partition for partition, _, _ in received} <= set(range(PARTITIONS))
    assert len({partition for partition, _, _ in received}) > 1

    broker.stop()
    assert not port_is_open(broker.port)
    assert not broker.workdir.exists()


def test_unknown_broker_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown broker kind"):
        start_broker("redpanda")
