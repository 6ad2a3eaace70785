"""The store reader both SQLite sources share: headers, targeted reads, and rewrites in place."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import orjson
import pytest

from stream.sources.positions import save_positions
from stream.sources.sqlite import KIND, SqliteFollower
from stream.sources.store.reader import TranscriptStore
from stream.sources.store.rewrites import STRIDE, Progress
from tests.support.sources import drain
from tests.support.sqlite_store import (
    compact,
    create_openclaw_store,
    event,
    insert,
    open_window,
    replace_from,
    rotate,
    rows,
)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "state" / "agents" / "ops" / "agent" / "openclaw-agent.sqlite"


@pytest.fixture
def writer(database: Path):
    connection = create_openclaw_store(database)
    yield connection
    connection.close()


def follower(database: Path) -> SqliteFollower:
    return SqliteFollower(database, database.parent / "checkpoint.json", page_size=500)


def values(records) -> list[bytes]:
    return [record[1] for record in records]


def test_records_carry_the_agent_the_session_key_and_the_window_of_a_reset(
    database: Path, writer: sqlite3.Connection
) -> None:
    open_window(writer, "old", "agent:main:main")
    generation = open_window(writer, "new", "agent:main:main", previous="old", reason="reset")
    insert(writer, "new", 0)

    [(key, _, headers)] = drain(follower(database))

    assert key == b"new"
    assert dict(headers) == {
        "openclaw-agent-id": b"main",  # the session key's, before the folder's "ops"
        "openclaw-session-key": b"agent:main:main",
        "openclaw-previous-session-id": b"old",
        "openclaw-window-reason": b"reset",
        "openclaw-generation": generation.encode(),
    }


def test_without_a_window_the_agent_comes_from_the_folder(
    database: Path, writer: sqlite3.Connection
) -> None:
    insert(writer, "s", 0)

    [(_, _, headers)] = drain(follower(database))

    assert dict(headers) == {"openclaw-agent-id": b"ops"}


def test_a_targeted_read_looks_at_the_named_sessions_only(
    database: Path, writer: sqlite3.Connection
) -> None:
    a = insert(writer, "a", 0, 1)
    insert(writer, "b", 0)
    store = TranscriptStore(database, Progress({}), page_size=500)

    read = store.read_sessions(["a", "missing"])
    store.advance(read.progress)

    assert values(read.records) == a
    assert values(store.read().records) == [event("b", 0).encode()]


def test_a_compaction_is_sent_again_from_its_first_changed_event(
    database: Path, writer: sqlite3.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    first = open_window(writer, "s", "agent:main:main")
    insert(writer, "s", *range(10))
    source = follower(database)
    drain(source)

    compact(writer, "s", max_lines=4)
    with caplog.at_level(logging.WARNING):
        again = drain(follower(database))  # a restart: the chain is in the checkpoint

    # The whole compacted session (header first, re-parented event next), under its new
    # generation; the worker drops the unchanged ones as redeliveries of the same bytes.
    assert values(again) == rows(writer, "s")
    assert {dict(r[2])["openclaw-generation"] for r in again} != {first.encode()}
    assert "was rewritten in place" in caplog.text
    later = insert(writer, "s", 4)
    assert values(drain(follower(database))) == later


def test_a_suffix_rewrite_resends_from_the_last_mark_before_it(
    database: Path, writer: sqlite3.Connection
) -> None:
    open_window(writer, "s", "agent:main:main")
    insert(writer, "s", *range(STRIDE * 2 + 5))
    drain(follower(database))

    changed = STRIDE * 2 - 3  # inside the second stride: the first mark still holds
    replace_from(writer, "s", changed, [event("r", n) for n in range(3)])

    again = values(drain(follower(database)))

    assert again == rows(writer, "s")[STRIDE:]
    assert values(drain(follower(database))) == []


def test_a_new_generation_that_changed_nothing_sent_sends_nothing(
    database: Path, writer: sqlite3.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    open_window(writer, "s", "agent:main:main")
    insert(writer, "s", 0, 1)
    drain(follower(database))

    rotate(writer, "s")
    more = insert(writer, "s", 2)
    with caplog.at_level(logging.INFO):
        assert values(drain(follower(database))) == more
    assert "the 2 events sent are unchanged" in caplog.text


def test_a_session_rewritten_shorter_without_a_generation_is_caught_too(
    tmp_path: Path,
) -> None:
    """follow-sqlite's own test stores have no watermark table: a shrink still tells."""
    database = tmp_path / "openclaw-agent.sqlite"
    connection = sqlite3.connect(database, isolation_level=None)
    connection.execute(
        "CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT, "
        "created_at INTEGER, PRIMARY KEY (session_id, seq))"
    )
    insert(connection, "s", 0, 1, 2)
    drain(follower(database))

    connection.execute("DELETE FROM transcript_events WHERE seq > 0")
    connection.execute(
        "INSERT INTO transcript_events VALUES ('s', 1, ?, 0)", (event("x", 1),)
    )

    # Within the first stride there is no mark to resume from: the session again, from 0.
    assert values(drain(follower(database))) == [event("s", 0).encode(), event("x", 1).encode()]
    connection.close()


def test_a_checkpoint_from_before_chains_is_adopted_without_resending(
    database: Path, writer: sqlite3.Connection
) -> None:
    open_window(writer, "s", "agent:main:main")
    insert(writer, "s", 0, 1)
    checkpoint = database.parent / "checkpoint.json"
    save_positions(checkpoint, KIND, str(database.resolve()), {"sessions": {"s": 1}})

    assert drain(follower(database)) == []
    compact(writer, "s", max_lines=2)

    assert values(drain(follower(database))) == rows(writer, "s")
    saved = orjson.loads(checkpoint.read_bytes())
    assert saved["sessions"] == {"s": 1}
    assert saved["chains"]["s"]["count"] == 2
