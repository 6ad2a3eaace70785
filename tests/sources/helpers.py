"""Running a source without a broker: a fake sender that records what it was given."""

from __future__ import annotations

import asyncio
from collections import defaultdict

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
