"""The contract of a source: what `stream.sources.publish.pump` asks of everything that feeds the
input topic.

A source only reads: `poll()` says which records are new and where the source will stand once
they are delivered, without moving; `commit()` moves it there and saves its checkpoint, once the
broker has acknowledged the records. A live source (`LiveSource`: the gateway source,
follow-sqlite) also says when a poll may find something, so that the loop need not wait for its
next interval.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from stream.kafka.producer import Headers

# (key, value), or (key, value, headers) for a source that knows more than the key.
Record = tuple[bytes, bytes] | tuple[bytes, bytes, Headers]
P = TypeVar("P")
DEFAULT_POLL_INTERVAL = 1.0


class SourceError(RuntimeError):
    """The source cannot go on: its input is missing, unreadable or needs a missing module."""


@dataclass(frozen=True)
class Batch(Generic[P]):
    records: list[Record]
    position: P  # where the source stands once `records` are acknowledged
    more: bool = False  # a read limit cut the batch short: poll again without waiting


class Source(Protocol[P]):
    def poll(self) -> Batch[P]: ...

    def commit(self, batch: Batch[P]) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class LiveSource(Source[P], Protocol[P]):
    async def watch(self, news: asyncio.Event, stop: asyncio.Event) -> None:
        """Runs beside `pump` until `stop`; sets `news` when a poll may find something.

        Raises SourceError when the source cannot go on; `pump` then stops with it.
        """
        ...
