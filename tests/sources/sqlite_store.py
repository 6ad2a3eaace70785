"""A real SQLite file with the schema of OpenClaw 2026.8+'s per-agent store, in WAL mode."""

from __future__ import annotations

import sqlite3
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
