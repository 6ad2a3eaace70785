"""Running a source without a broker: a fake sender that records what it was given."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from stream.brokers import RunningBroker
from stream.consumers.tail import read_topic
from stream.settings import Settings
from stream.sources.publish import Record, Source, pump


def drain(source: Source) -> list[Record]:
    """What one `--once` run of `source` would send, in order, committing as it goes."""
    sent: list[Record] = []

    async def send(records: list[Record]) -> None:
        sent.extend(records)

    asyncio.run(pump(source, send, poll_interval=0.01, once=True))
    return sent


def by_key(records: list[Record]) -> dict[bytes, list[bytes]]:
    grouped: dict[bytes, list[bytes]] = defaultdict(list)
    for key, value in records:
        grouped[key].append(value)
    return dict(grouped)


def records_with_headers(
    broker: RunningBroker, topic: str
) -> list[tuple[bytes, bytes, dict[str, bytes]]]:
    """Every record of `topic`: key, value and headers."""
    settings = Settings.load(None, {"SESSION_STREAM_BROKER": broker.url})

    async def read() -> list:
        return [
            (record.key, record.value, dict(record.headers))
            async for record in read_topic(settings, topic, follow=False)
        ]

    return asyncio.run(read())
