"""The one reader of OpenClaw's per-agent SQLite store, shared by `follow-sqlite` and `gateway`.

OpenClaw 2026.8+ keeps an agent's transcripts in openclaw-agent.sqlite, table
transcript_events(session_id, seq, event_json, created_at, event_zstd, event_utf8_bytes, ...)
with primary key (session_id, seq). The reader opens it read-only and returns each new event
byte for byte, keyed by its session id, in seq order per session. Events are read in keyset
pages (seq above the last one sent, per session); every SELECT is its own short read
transaction and none is open while sending, so OpenClaw's writer and WAL checkpoints are never
held up. A transcript rewritten in place is told and sent again as `rewrites` says.

`changed()` says when another connection committed (when to look: `changes`); then
`read_appended()` reads only the sessions that have rows past the highest rowid the last read
covered (rows are only appended under a fresh rowid; a rowid range scan costs what is new, not
what is stored), and the whole-store read stays on the poll interval for what an append does
not show (a rewrite in place, a deleted session).

Records carry headers from the store when it has them: the agent id (from the session key, or
the agents/<id>/agent/ folder), the session key, the previous session id and the reason of the
session's window (reset, rollover, fork, ...), and the transcript generation.

Newer builds store a large event zstd-compressed in event_zstd with event_json NULL; reading
those needs the `zstandard` package (or Python 3.14+, whose compression.zstd is used instead).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from stream.kafka.producer import Headers
from stream.sources.base import Record, SourceError
from stream.sources.store.rewrites import (
    Chain,
    Mark,
    Progress,
    chain_of,
    resume_point,
    rewritten,
)

log = logging.getLogger(__name__)

TABLE = "transcript_events"
WATERMARKS = "transcript_rewrite_watermarks"
WINDOWS = "session_windows"
# Under WAL a reader waits for a lock only while a crashed writer's log is recovered.
BUSY_TIMEOUT = 5.0
# Payload columns in the order the page queries select them; absent ones read as NULL.
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
class Read:
    """What one read found: the records (in order) and where the store stands after them."""

    records: list[Record]
    progress: Progress
    more: bool = False


@dataclass(frozen=True)
class Window:
    """A session's row in session_windows, as far as downstream needs it."""

    session_key: str | None
    previous_session_id: str | None
    reason: str | None


class TranscriptStore:
    """Reads one agent database; sends nothing and moves nothing itself.

    `read()` looks at every session, `read_sessions()` at the named ones only, and
    `read_appended()` at those appended to since the last read (what the sources do when the
    store's change counter moved, the gateway source on an event too); all return the records
    and the progress they reach, which the caller adopts with `advance()` once the records are
    acknowledged.
    """

    def __init__(
        self,
        path: Path,
        progress: Progress,
        page_size: int,
        decompress: Decompress | None = None,
        agent_id: str | None = None,
    ) -> None:
        if not path.is_file():
            # mode=ro would only say "unable to open database file", and only once polled.
            raise SourceError(f"{path} does not exist or is not a file")
        self.path = path
        self.page_size = page_size
        self.decompress = decompress
        self.agent_id = agent_id if agent_id is not None else agent_of_path(path)
        self.progress = progress
        self._connection: sqlite3.Connection | None = None
        self._windows: dict[str, Window] = {}
        self._seen_version: int | None = None  # of changed()
        # data_version of the last read_appended (or complete read) that read everything
        # appended: while it stays, nothing was.
        self._appended_version: int | None = None

    def changed(self) -> bool:
        """Whether another connection committed since the last call (True on the first)."""
        try:
            (version,) = self.connect().execute("PRAGMA data_version").fetchone()
        except sqlite3.Error as error:
            raise SourceError(f"cannot read {self.path}: {error}") from error
        moved = version != self._seen_version
        self._seen_version = version
        return moved

    def read(self) -> Read:
        try:
            return self._read_all(self.connect())
        except sqlite3.Error as error:
            raise SourceError(f"cannot read {self.path}: {error}") from error

    def read_sessions(self, sessions: Iterable[str]) -> Read:
        """The new events of these sessions only; the read version is left as it was, since
        the other sessions were not looked at."""
        try:
            connection = self.connect()
            columns = self._columns(connection)
            tops = self._tops(connection, sorted(set(sessions)))
            marks = dict(self.progress.marks)
            records, more = self._read_tops(connection, columns, tops, marks)
            progress = Progress(marks, self.progress.read_version, self.progress.read_rowid)
            return Read(records, progress, more)
        except sqlite3.Error as error:
            raise SourceError(f"cannot read {self.path}: {error}") from error

    def read_appended(self, also: Iterable[str] = ()) -> Read:
        """The new events of the sessions with rows appended since the last complete read, and
        of the sessions in `also`; the whole store when there is no such read to go by or rows
        were deleted from the top (a rowid may then be given again)."""
        since = self.progress.read_rowid
        if since is None:
            return self.read()
        try:
            connection = self.connect()
            (version,) = connection.execute("PRAGMA data_version").fetchone()
            if version == self._appended_version and not also:
                return Read([], self.progress)
            self._columns(connection)  # the table and its columns, before asking for rowids
            top = _top_rowid(connection)
            if top < since:
                return self.read()
            sessions = {row[0] for row in connection.execute(
                f"SELECT DISTINCT session_id FROM {TABLE} WHERE rowid > ?", (since,))}
        except sqlite3.Error as error:
            raise SourceError(f"cannot read {self.path}: {error}") from error
        read = self.read_sessions(sessions.union(also))
        if read.more:  # cut short: the same sessions are looked for again from the same rowid
            return read
        self._appended_version = version
        return replace(read, progress=replace(read.progress, read_rowid=top))

    def advance(self, progress: Progress) -> None:
        self.progress = progress

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        # data_version values compare only within one connection: the next one reads anew.
        self.progress = replace(self.progress, read_version=None)
        self._seen_version = self._appended_version = None

    def connect(self) -> sqlite3.Connection:
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

    # --- reading ------------------------------------------------------------------------------

    def _read_all(self, connection: sqlite3.Connection) -> Read:
        (version,) = connection.execute("PRAGMA data_version").fetchone()
        if version == self.progress.read_version:
            return Read([], self.progress)
        columns = self._columns(connection)
        # Before the sessions' tops: a row appended in between is read now and looked at again
        # by the next read_appended, never missed.
        rowid = _top_rowid(connection)
        tops = self._tops(connection, None)
        # Sessions no longer in the table are forgotten, so the checkpoint does not grow forever.
        marks = {s: mark for s, mark in self.progress.marks.items() if s in tops}
        records, more = self._read_tops(connection, columns, tops, marks)
        done = not more
        if done:
            self._appended_version = version
        return Read(records, Progress(marks, version if done else None,
                                      rowid if done else self.progress.read_rowid), more)

    def _tops(
        self, connection: sqlite3.Connection, sessions: list[str] | None
    ) -> dict[str, tuple[int, str | None]]:
        """Per session, its highest seq and its generation (None without one)."""
        generation = (
            f"(SELECT generation FROM {WATERMARKS} w WHERE w.session_id = e.session_id)"
            if self._has_table(connection, WATERMARKS)
            else "NULL"
        )
        select = f"SELECT e.session_id, max(e.seq), {generation} FROM {TABLE} e"
        if sessions is None:
            rows = connection.execute(
                f"{select} GROUP BY e.session_id ORDER BY e.session_id"
            ).fetchall()
        else:
            rows = []
            for session_id in sessions:
                row = connection.execute(f"{select} WHERE e.session_id = ?", (session_id,))
                found = row.fetchone()
                if found is not None and found[0] is not None:
                    rows.append(found)
        return {session_id: (top, gen) for session_id, top, gen in rows}

    def _read_tops(
        self,
        connection: sqlite3.Connection,
        columns: set[str],
        tops: dict[str, tuple[int, str | None]],
        marks: dict[str, Mark],
    ) -> tuple[list[Record], bool]:
        """Reads the sessions in `tops` past their marks, up to the page budget; updates
        `marks` in place. Returns the records and whether the budget cut the read short."""
        first_page, next_page = _page_queries(columns)
        records: list[Record] = []
        budget = self.page_size
        more = False
        for session_id, (top, generation) in tops.items():
            mark = marks.get(session_id)
            if mark is not None and rewritten(mark, generation, top):
                mark = self._resume_point(connection, first_page, session_id, mark, generation, top)
                if mark is None:
                    marks.pop(session_id, None)
                else:
                    marks[session_id] = mark
            if mark is not None and top <= mark.seq:
                continue
            if budget == 0:
                more = True
                break
            if mark is None:
                rows = connection.execute(first_page, (session_id, budget)).fetchall()
            else:
                rows = connection.execute(next_page, (session_id, mark.seq, budget)).fetchall()
            if not rows:
                continue  # deleted since the discovery query
            budget -= len(rows)
            chain = mark.chain if mark is not None and mark.chain is not None else Chain()
            headers = self._headers(connection, session_id, generation)
            key = session_id.encode("utf-8")
            for _seq, value in self._events(session_id, rows):
                records.append((key, value, headers) if headers else (key, value))
                chain = chain.extend(value)
            marks[session_id] = Mark(rows[-1][0], generation, chain)
            more = more or rows[-1][0] < top
        return records, more

    def _resume_point(  # noqa: PLR0917 - private, called once
        self,
        connection: sqlite3.Connection,
        first_page: str,
        session_id: str,
        mark: Mark,
        generation: str | None,
        top: int,
    ) -> Mark | None:
        """After a possible rewrite: the mark to go on from (None: from the session's start).

        Reads the session from its start, at most as far as was sent, comparing the chain.
        """
        chain = mark.chain
        if chain is None:
            return self._adopt(connection, first_page, session_id, Mark(mark.seq, generation), top)
        cursor = connection.execute(first_page, (session_id, -1))  # LIMIT -1: no limit
        try:
            good, unchanged = resume_point(chain, generation, self._events(session_id, cursor))
        finally:
            cursor.close()
        if unchanged:
            log.info(
                "session %s in %s has a new generation %s; the %d events sent are unchanged",
                session_id, self.path, generation, chain.count,
            )
            return good
        start = good.chain.count if good is not None and good.chain is not None else 0
        log.warning(
            "session %s in %s was rewritten in place (generation %s): sending it again from "
            "its event %d (of the %d sent before)",
            session_id, self.path, generation, start + 1, chain.count,
        )
        return good

    def _adopt(
        self, connection: sqlite3.Connection, first_page: str, session_id: str, mark: Mark, top: int
    ) -> Mark | None:
        """A mark from a checkpoint written before chains were kept: the chain of the events
        up to its seq as they are now (they were sent as they are, unless a rewrite came
        before this reader did, which nothing can tell any more)."""
        if top < mark.seq:
            log.warning(
                "session %s in %s is shorter than its checkpoint, which predates chain "
                "digests: sending it again from its start",
                session_id, self.path,
            )
            return None
        upto = first_page.replace("ORDER BY", "AND seq <= ? ORDER BY")
        events = self._events(session_id, connection.execute(upto, (session_id, mark.seq, -1)))
        return replace(mark, chain=chain_of(value for _, value in events))

    def _events(
        self, session_id: str, rows: Iterable[tuple[Any, ...]]
    ) -> Iterator[tuple[int, bytes]]:
        for seq, event_json, event_zstd, size in rows:
            value = self._event(session_id, seq, event_json, event_zstd, size)
            if value is not None:
                yield seq, value

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

    # --- what the store knows about a session ------------------------------------------------

    def _headers(
        self, connection: sqlite3.Connection, session_id: str, generation: str | None
    ) -> Headers:
        window = self._window(connection, session_id)
        agent_id = agent_of_session_key(window.session_key) or self.agent_id
        pairs = (
            ("openclaw-agent-id", agent_id),
            ("openclaw-session-key", window.session_key),
            ("openclaw-previous-session-id", window.previous_session_id),
            ("openclaw-window-reason", window.reason),
            ("openclaw-generation", generation),
        )
        return tuple((name, value.encode()) for name, value in pairs if value is not None)

    def _window(self, connection: sqlite3.Connection, session_id: str) -> Window:
        """Cached: a window's key, predecessor and reason are fixed when OpenClaw opens it."""
        window = self._windows.get(session_id)
        if window is None:
            row = None
            if self._has_table(connection, WINDOWS):
                row = connection.execute(
                    f"SELECT session_key, previous_session_id, reason FROM {WINDOWS} "
                    "WHERE session_id = ?",
                    (session_id,),
                ).fetchone()
            if row is None:
                return Window(None, None, None)  # not cached: the window may come later
            window = Window(*row)
            self._windows[session_id] = window
        return window

    def _has_table(self, connection: sqlite3.Connection, table: str) -> bool:
        row = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        return row is not None

    def _columns(self, connection: sqlite3.Connection) -> set[str]:
        """Checked on every read: a migration may add columns while this runs."""
        columns = {row[1] for row in connection.execute(f"PRAGMA table_info({TABLE})")}
        if not columns:
            raise SourceError(f"{self.path} has no {TABLE} table")
        if not {"session_id", "seq"} <= columns or not {"event_json", "event_zstd"} & columns:
            raise SourceError(
                f"{TABLE} in {self.path} lacks session_id, seq or an event column: "
                f"it has {', '.join(sorted(columns))}"
            )
        return columns


def has_events_table(path: Path) -> bool:
    """Whether OpenClaw's migration has created the events table yet: a gateway creates its
    store file a moment before the table, and a store found in between is not one to follow
    yet, as a missing one is not."""
    try:
        connection = sqlite3.connect(
            f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=BUSY_TIMEOUT
        )
        try:
            row = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)
            ).fetchone()
        finally:
            connection.close()
    except sqlite3.Error:
        return False
    return row is not None


def agent_of_path(path: Path) -> str | None:
    """`main` for <state>/agents/main/agent/openclaw-agent.sqlite, else None."""
    parts = path.resolve().parts
    if len(parts) >= 4 and parts[-2] == "agent" and parts[-4] == "agents":
        return parts[-3]
    return None


def agent_of_session_key(session_key: str | None) -> str | None:
    """`main` for agent:main:explicit:x; None for a key of another shape."""
    if session_key is None:
        return None
    parts = session_key.split(":")
    return parts[1] if len(parts) >= 3 and parts[0] == "agent" and parts[1] else None


def _top_rowid(connection: sqlite3.Connection) -> int:
    """The events table's highest rowid (0 when empty): one step down its b-tree."""
    (top,) = connection.execute(f"SELECT max(rowid) FROM {TABLE}").fetchone()
    return top or 0


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
