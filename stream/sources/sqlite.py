"""`session-stream follow-sqlite`: publish the transcript events of an OpenClaw agent database.

Polls one agent's openclaw-agent.sqlite (OpenClaw 2026.8+) read-only and publishes each new
event byte for byte to the input topic, keyed by its session id, in seq order per session, with
what the store knows of the session as headers. A transcript OpenClaw rewrote in place (its
generation changed) is sent again from its first changed event. The reading is
`stream.sources.store`'s, which the gateway source shares; the last seq sent per
session, and the chain digests that tell a rewrite, are checkpointed after the broker
acknowledged them. A commit to the store wakes the follower within CHANGE_INTERVAL (the store's
change counter; a fifth of it while the store is being written to), which then reads the
sessions appended to; the whole store is read every poll interval.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from stream.sources.base import DEFAULT_POLL_INTERVAL, Batch
from stream.sources.positions import PositionsWriter, load_positions
from stream.sources.store.changes import CHANGE_INTERVAL, ChangeLooks
from stream.sources.store.reader import Decompress, TranscriptStore, zstd_decompressor
from stream.sources.store.rewrites import Progress, progress_from_json, progress_to_json

__all__ = ["Progress", "SqliteFollower", "zstd_decompressor"]

KIND = "follow-sqlite"
DEFAULT_CHECKPOINT = ".session-stream/follow-sqlite.checkpoint.json"
DEFAULT_PAGE_SIZE = 500


class SqliteFollower:
    """Reads the new transcript events of one database; sends nothing itself."""

    def __init__(
        self,
        path: Path,
        checkpoint: Path,
        page_size: int = DEFAULT_PAGE_SIZE,
        decompress: Decompress | None = None,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        change_interval: float = CHANGE_INTERVAL,
    ) -> None:
        self.checkpoint = checkpoint
        self.poll_interval = poll_interval
        self.looks = ChangeLooks(change_interval)
        self._last_full: float | None = None  # None: a whole-store read is due
        self._full_due = False
        self.origin = str(path.resolve())
        progress = progress_from_json(load_positions(checkpoint, KIND, self.origin), checkpoint)
        self.store = TranscriptStore(path, progress, page_size, decompress)
        # Saves on a thread of its own, as the gateway source's: a synchronous fsync per batch
        # held up the next read and send (bench's follow-sqlite p99). Made at the first save,
        # so a closed follower can go on.
        self._writer: PositionsWriter | None = None

    @property
    def progress(self) -> Progress:
        return self.store.progress

    def poll(self) -> Batch[Progress]:
        now = time.monotonic()
        if self._full_due or self._last_full is None or now - self._last_full >= self.poll_interval:
            self._last_full = now
            read = self.store.read()
            self._full_due = read.more  # the next page of the whole-store read comes next
        else:
            read = self.store.read_appended()  # one PRAGMA when nothing was committed
        return Batch(read.records, read.progress, read.more)

    async def watch(self, news: asyncio.Event, stop: asyncio.Event) -> None:
        """Sets `news` when the store's change counter moved."""
        while not stop.is_set():
            await self.looks.wait()
            if self.store.changed():
                self.looks.written()
                news.set()

    def commit(self, batch: Batch[Progress]) -> None:
        if batch.position.marks != self.progress.marks:
            if self._writer is None:
                self._writer = PositionsWriter(self.checkpoint, KIND, self.origin)
            self._writer.save(progress_to_json(batch.position))
        self.store.advance(batch.position)

    def close(self) -> None:
        """Writes the last checkpoint handed over before returning."""
        self.store.close()
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()

    def _connect(self) -> sqlite3.Connection:
        return self.store.connect()
