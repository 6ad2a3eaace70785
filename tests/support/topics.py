"""Topics in tests: command arguments, settings for a broker, what a topic holds, publishing."""

from __future__ import annotations

import argparse
from collections import defaultdict

from stream.brokers import RunningBroker
from stream.consumers import tail
from stream.kafka.producer import make_producer, send_records
from stream.settings import Settings

PARTITIONS = 4


def parse(module, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return parser.parse_args(argv)


def settings_for(broker: RunningBroker, **topics: str) -> Settings:
    return Settings.load(None, {"SESSION_STREAM_BROKER": broker.url}).replace(**topics)


async def read_all(
    settings: Settings, topic: str
) -> tuple[dict[bytes, list[bytes]], dict[bytes, set[int]]]:
    """Per key, the values in offset order and the partitions they were on."""
    values: dict[bytes, list[bytes]] = defaultdict(list)
    partitions: dict[bytes, set[int]] = defaultdict(set)
    async for consumed in tail.read_topic(settings, topic, follow=False):
        values[consumed.key] += [consumed.value]
        partitions[consumed.key].add(consumed.partition)
    return dict(values), dict(partitions)


async def publish(settings: Settings, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = make_producer(settings)
    try:
        await producer.start()
        await send_records(producer, topic, records)
    finally:
        await producer.stop()
