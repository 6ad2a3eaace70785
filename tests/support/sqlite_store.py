"""A real SQLite file with the schema of OpenClaw 2026.8+'s per-agent store, in WAL mode."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import orjson

SCHEMA = """
CREATE TABLE transcript_events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_json TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
)
"""
COMPRESSED_SCHEMA = """
CREATE TABLE transcript_events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_json TEXT,
    event_zstd BLOB,
    event_utf8_bytes INTEGER,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
)
"""


def create_store(path: Path, schema: str = SCHEMA) -> sqlite3.Connection:
    """The writer's connection (autocommit; BEGIN for a transaction)."""
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute(schema)
    return connection


def event(session_id: str, seq: int) -> str:
    return orjson.dumps(
        {"type": "message", "id": f"{session_id}-{seq}", "message": {"content": "grüße ✓"}}
    ).decode()


def insert(connection: sqlite3.Connection, session_id: str, *seqs: int) -> list[bytes]:
    """Adds the events (one transaction each) and returns their bytes as they must be sent."""
    for seq in seqs:
        connection.execute(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at) "
            "VALUES (?, ?, ?, ?)",
            (session_id, seq, event(session_id, seq), seq),
        )
    return [event(session_id, seq).encode() for seq in seqs]


# The tables of OpenClaw 2026.9.6's openclaw-agent.sqlite that the sources read, as its schema
# declares them (session_windows cut to the columns read; STRICT as there).
OPENCLAW_SCHEMA = """
CREATE TABLE session_windows (
    session_id TEXT NOT NULL PRIMARY KEY,
    session_key TEXT NOT NULL,
    previous_session_id TEXT,
    reason TEXT CHECK (reason IS NULL OR reason IN ('initial', 'reset', 'rollover', 'fork',
        'rewind', 'switch', 'recovery', 'compaction')),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE transcript_events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_json TEXT,
    created_at INTEGER NOT NULL,
    event_zstd BLOB,
    event_utf8_bytes INTEGER,
    navigation_json TEXT,
    PRIMARY KEY (session_id, seq)
) STRICT;
CREATE TABLE transcript_rewrite_watermarks (
    session_id TEXT NOT NULL PRIMARY KEY,
    generation TEXT NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
"""


def create_openclaw_store(path: Path) -> sqlite3.Connection:
    """A store with OpenClaw's tables, at `path` (name it agents/<id>/agent/... for an agent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.executescript(OPENCLAW_SCHEMA)
    return connection


def open_window(
    connection: sqlite3.Connection,
    session_id: str,
    session_key: str,
    previous: str | None = None,
    reason: str | None = None,
) -> str:
    """A session as OpenClaw opens one: its window and a first generation. Returns that."""
    connection.execute(
        "INSERT INTO session_windows VALUES (?, ?, ?, ?, 0, 0)",
        (session_id, session_key, previous, reason),
    )
    return rotate(connection, session_id)


def rotate(connection: sqlite3.Connection, session_id: str) -> str:
    """What OpenClaw's rotateTranscriptGenerationInTransaction does: a new random generation."""
    generation = uuid.uuid4().hex
    connection.execute(
        "INSERT INTO transcript_rewrite_watermarks VALUES (?, ?, 0) "
        "ON CONFLICT (session_id) DO UPDATE SET generation = excluded.generation",
        (session_id, generation),
    )
    return generation


def rows(connection: sqlite3.Connection, session_id: str) -> list[bytes]:
    """A session's events as they are now, in seq order, as they must be sent."""
    return [
        row[0].encode()
        for row in connection.execute(
            "SELECT event_json FROM transcript_events WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
    ]


def replace_from(
    connection: sqlite3.Connection, session_id: str, seq: int, events: list[str]
) -> None:
    """A suffix rewrite (a rewind, a retry): rows from `seq` on replaced by `events`, numbered
    from `seq`, and the generation rotated, in one transaction."""
    connection.execute("BEGIN IMMEDIATE")
    connection.execute(
        "DELETE FROM transcript_events WHERE session_id = ? AND seq >= ?", (session_id, seq)
    )
    for number, body in enumerate(events, start=seq):
        connection.execute(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at) "
            "VALUES (?, ?, ?, 0)",
            (session_id, number, body),
        )
    rotate(connection, session_id)
    connection.execute("COMMIT")


def compact(connection: sqlite3.Connection, session_id: str, max_lines: int) -> None:
    """What `sessions.compact {maxLines}` does to a SQLite transcript (measured on 2026.9.6):
    the header and the newest max_lines - 1 events stay, numbered again from 0, the first of
    them re-parented to null, in one transaction that rotates the generation."""
    events = [orjson.loads(body) for body in rows(connection, session_id)]
    kept = [events[0], *events[1:][-(max_lines - 1) :]]
    kept[1] = {**kept[1], "parentId": None}
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("DELETE FROM transcript_events WHERE session_id = ?", (session_id,))
    for seq, body in enumerate(kept):
        connection.execute(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at) "
            "VALUES (?, ?, ?, 0)",
            (session_id, seq, orjson.dumps(body).decode()),
        )
    rotate(connection, session_id)
    connection.execute("COMMIT")
