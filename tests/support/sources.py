"""Running a source without a broker: a fake sender that records what it was given."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path

import orjson

from stream.brokers import RunningBroker
from stream.consumers.tail import read_topic
from stream.settings import Settings
from stream.sources.base import Batch, Record, Source
from stream.sources.publish import pump


def drain(source: Source) -> list[Record]:
    """What one `--once` run of `source` would send, in order, committing as it goes."""
    sent: list[Record] = []

    async def send(records: list[Record]) -> None:
        sent.extend(records)

    asyncio.run(pump(source, send, poll_interval=0.01, once=True))
    source.close()  # as the command does: a source's last checkpoint is written by then
    return sent


def without_headers(records: list[Record]) -> list[tuple[bytes, bytes]]:
    return [(key, value) for key, value, *_ in records]


def by_key(records: list[Record]) -> dict[bytes, list[bytes]]:
    grouped: dict[bytes, list[bytes]] = defaultdict(list)
    for key, value, *_ in records:
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


class ScriptedSource:
    """Hands out prepared batches; remembers which were committed."""

    def __init__(self, batches: list[Batch[int]]) -> None:
        self.batches = batches
        self.polls = 0
        self.committed: list[int] = []

    def poll(self) -> Batch[int]:
        self.polls += 1
        if self.batches:
            return self.batches.pop(0)
        return Batch([], self.committed[-1] if self.committed else 0)

    def commit(self, batch: Batch[int]) -> None:
        self.committed.append(batch.position)

    def close(self) -> None:
        pass


def records(*values: bytes) -> list[Record]:
    return [(b"k", value) for value in values]


def header(session_id: str) -> bytes:
    return orjson.dumps({"type": "session", "version": 3, "id": session_id}) + b"\n"


def entry(entry_id: str, text: str = "hello") -> bytes:
    line = {"type": "message", "id": entry_id, "message": {"role": "user", "content": text}}
    return orjson.dumps(line) + b"\n"


def lines(*chunks: bytes) -> list[bytes]:
    """The records `follow` makes of these complete lines: without their newline."""
    return [chunk.rstrip(b"\n") for chunk in chunks]


def append(path: Path, *chunks: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(b"".join(chunks))
