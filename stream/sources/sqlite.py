"""`session-stream follow-sqlite`: publish the transcript events of an OpenClaw agent database.

OpenClaw 2026.8+ keeps an agent's transcripts in openclaw-agent.sqlite, table
transcript_events(session_id, seq, event_json, created_at) with primary key (session_id, seq).
This polls it read-only and publishes each new event byte for byte to the input topic, keyed by
its session id, in seq order per session. Events are read in keyset pages (seq above the last
one sent, per session); every SELECT is its own short read transaction and none is open while
sending, so OpenClaw's writer and WAL checkpoints are never held up. The last seq sent per
session is checkpointed after the broker acknowledged it.

Newer builds may store an event zstd-compressed in event_zstd with event_json NULL; reading those
needs the `zstandard` package (or Python 3.14+, whose compression.zstd is used instead).
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

from stream.settings import positive_int
from stream.sources.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from stream.sources.publish import Batch, Record, SourceError, add_source_arguments, run

log = logging.getLogger(__name__)

KIND = "follow-sqlite"
DEFAULT_CHECKPOINT = ".session-stream/follow-sqlite.checkpoint.json"
DEFAULT_PAGE_SIZE = 500
TABLE = "transcript_events"
# Under WAL a reader waits for a lock only while a crashed writer's log is recovered.
BUSY_TIMEOUT = 5.0
# Payload columns in the order the page query selects them; absent ones read as NULL.
# The cast returns event_json's bytes as stored, so they are published unchanged.
PAYLOAD = (
    ("event_json", "CAST(event_json AS BLOB)"),
    ("event_zstd", "event_zstd"),
    ("event_utf8_bytes", "event_utf8_bytes"),
)

# (compressed bytes, decompressed size if known) -> decompressed bytes; ValueError if corrupt.
Decompress = Callable[[bytes, int | None], bytes]


def zstd_decompressor() -> Decompress | None:
    """zstd from the standard library (Python 3.14+), else from `zstandard`, else None."""
    try:
        from compression import zstd
    except ImportError:
        pass
    else:

        def decompress_stdlib(data: bytes, _size: int | None) -> bytes:
            try:
                return zstd.decompress(data)
            except zstd.ZstdError as error:
                raise ValueError(str(error)) from error

        return decompress_stdlib
    try:
        import zstandard
    except ImportError:
        return None

    def decompress_package(data: bytes, size: int | None) -> bytes:
        try:
            # A frame written without its content size needs the size given.
            return zstandard.ZstdDecompressor().decompress(data, max_output_size=size or 0)
        except zstandard.ZstdError as error:
            raise ValueError(str(error)) from error

    return decompress_package


@dataclass(frozen=True)
class Progress:
    last_seq: dict[str, int]  # per session, the last seq sent
    # PRAGMA data_version of a poll that read everything: while it stays, nothing is new.
    read_version: int | None = None


class SqliteFollower:
    """Reads the new transcript events of one database; sends nothing itself."""

    def __init__(
        self,
        path: Path,
        checkpoint: Path,
        page_size: int = DEFAULT_PAGE_SIZE,
        decompress: Decompress | None = None,
    ) -> None:
        if not path.is_file():
            # mode=ro would only say "unable to open database file", and only once polled.
            raise SourceError(f"{path} does not exist or is not a file")
        self.path = path
        self.checkpoint = checkpoint
        self.page_size = page_size
        self.decompress = decompress
        self.origin = str(path.resolve())
        self.progress = Progress(_load(checkpoint, self.origin))
        self._connection: sqlite3.Connection | None = None

    def poll(self) -> Batch[Progress]:
        try:
            return self._poll(self._connect())
        except sqlite3.Error as error:
            raise SourceError(f"cannot read {self.path}: {error}") from error

    def commit(self, batch: Batch[Progress]) -> None:
        if batch.position.last_seq != self.progress.last_seq:
            save_checkpoint(
                self.checkpoint, KIND, self.origin, {"sessions": batch.position.last_seq}
            )
        self.progress = batch.position

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _connect(self) -> sqlite3.Connection:
        """One connection kept across polls: data_version only compares within a connection.

        Holding it open holds no lock; autocommit mode makes each SELECT its own transaction.
        """
        if self._connection is None:
            uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
            connection = sqlite3.connect(
                uri,
                uri=True,
                isolation_level=None,
                timeout=BUSY_TIMEOUT,
                check_same_thread=False,
            )
            connection.execute("PRAGMA query_only = ON")
            self._connection = connection
        return self._connection

    def _poll(self, connection: sqlite3.Connection) -> Batch[Progress]:
        (version,) = connection.execute("PRAGMA data_version").fetchone()
        if version == self.progress.read_version:
            return Batch([], self.progress)
        first_page, next_page = _page_queries(self._columns(connection))
        newest = dict(
            connection.execute(
                f"SELECT session_id, max(seq) FROM {TABLE} GROUP BY session_id ORDER BY session_id"
            ).fetchall()
        )
        # Sessions no longer in the table are forgotten, so the checkpoint does not grow forever.
        last_seq = {s: seq for s, seq in self.progress.last_seq.items() if s in newest}
        records: list[Record] = []
        budget = self.page_size
        more = False
        for session_id, top in newest.items():
            after = last_seq.get(session_id)
            if after is not None and top <= after:
                continue
            if budget == 0:
                more = True
                break
            if after is None:
                rows = connection.execute(first_page, (session_id, budget)).fetchall()
            else:
                rows = connection.execute(next_page, (session_id, after, budget)).fetchall()
            if not rows:
                continue  # deleted since the discovery query
            budget -= len(rows)
            records += self._records(session_id, rows)
            last_seq[session_id] = rows[-1][0]
            more = more or rows[-1][0] < top
        return Batch(records, Progress(last_seq, None if more else version), more)

    def _columns(self, connection: sqlite3.Connection) -> set[str]:
        """Checked on every poll that reads: a migration may add columns while this runs."""
        columns = {row[1] for row in connection.execute(f"PRAGMA table_info({TABLE})")}
        if not columns:
            raise SourceError(f"{self.path} has no {TABLE} table")
        if not {"session_id", "seq"} <= columns or not {"event_json", "event_zstd"} & columns:
            raise SourceError(
                f"{TABLE} in {self.path} lacks session_id, seq or an event column: "
                f"it has {', '.join(sorted(columns))}"
            )
        return columns

    def _records(self, session_id: str, rows: list[tuple]) -> list[Record]:
        key = session_id.encode("utf-8")
        records = []
        for seq, event_json, event_zstd, size in rows:
            value = self._event(session_id, seq, event_json, event_zstd, size)
            if value is not None:
                records.append((key, value))
        return records

    def _event(
        self,
        session_id: str,
        seq: int,
        event_json: bytes | None,
        event_zstd: bytes | None,
        size: int | None,
    ) -> bytes | None:
        if event_json is not None:
            return event_json
        if event_zstd is None:
            log.warning("session %s seq %s has no event (all NULL); skipping it", session_id, seq)
            return None
        where = f"session {session_id} seq {seq} in {self.path}"
        if self.decompress is None:
            raise SourceError(
                f"{where} is zstd-compressed (event_zstd) and no zstd module is available: "
                "install the `zstandard` package, or run on Python 3.14+ (compression.zstd)"
            )
        try:
            return self.decompress(bytes(event_zstd), size)
        except ValueError as error:
            raise SourceError(f"{where}: cannot decompress event_zstd: {error}") from error


def _page_queries(columns: set[str]) -> tuple[str, str]:
    """The keyset page queries of a session: from its start, and after a given seq."""
    payload = ", ".join(
        expression if column in columns else "NULL" for column, expression in PAYLOAD
    )
    select = f"SELECT seq, {payload} FROM {TABLE} WHERE session_id = ?"
    return (
        f"{select} ORDER BY seq LIMIT ?",
        f"{select} AND seq > ? ORDER BY seq LIMIT ?",
    )


def _load(checkpoint: Path, origin: str) -> dict[str, int]:
    data = load_checkpoint(checkpoint, KIND, origin)
    if data is None:
        return {}
    sessions = data.get("sessions")
    if not isinstance(sessions, dict) or not all(
        isinstance(seq, int) and not isinstance(seq, bool) for seq in sessions.values()
    ):
        raise CheckpointError(f"checkpoint {checkpoint} has no valid sessions object")
    return sessions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "database", metavar="PATH", type=Path, help="an agent's openclaw-agent.sqlite"
    )
    parser.add_argument(
        "--page-size",
        type=positive_int,
        default=DEFAULT_PAGE_SIZE,
        metavar="N",
        help="most events read per query and sent per batch (default %(default)s)",
    )
    add_source_arguments(parser, DEFAULT_CHECKPOINT)


def main(args: argparse.Namespace, stderr: TextIO | None = None) -> int:
    """Exit 0 when done (--once) or stopped by a signal, 1 on a broker, database or checkpoint
    error (a zstd-compressed event without a zstd module among them)."""
    return run(
        "follow-sqlite",
        lambda: SqliteFollower(args.database, args.checkpoint, args.page_size, zstd_decompressor()),
        args,
        stderr,
    )
