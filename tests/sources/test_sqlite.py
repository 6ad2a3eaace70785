"""`follow-sqlite` reads new transcript events from a real SQLite store, without a broker."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import sqlite3
import threading
import zlib
from pathlib import Path

import orjson
import pytest
import zstandard

from stream.commands import follow_sqlite
from stream.sources.base import Record, SourceError
from stream.sources.publish import pump
from stream.sources.sqlite import SqliteFollower, zstd_decompressor
from tests.support.sources import by_key, drain
from tests.support.sqlite_store import COMPRESSED_SCHEMA, create_store, event, insert


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "openclaw-agent.sqlite"


@pytest.fixture
def writer(database: Path):
    connection = create_store(database)
    yield connection
    connection.close()


def follower(
    database: Path, page_size: int = 500, decompress=None, **intervals: float
) -> SqliteFollower:
    """A follower as a fresh process would make it, from the checkpoint on disk."""
    return SqliteFollower(
        database, database.with_name("sqlite.checkpoint.json"), page_size, decompress,
        **intervals,
    )


def test_events_are_sent_byte_for_byte_in_seq_order_keyed_by_session(
    database: Path, writer: sqlite3.Connection
) -> None:
    b = insert(writer, "s-b", 2)
    a = insert(writer, "s-a", 1, 2)
    b = insert(writer, "s-b", 1) + b

    sent = drain(follower(database))

    assert by_key(sent) == {b"s-a": a, b"s-b": b}


def test_keyset_pages_cross_page_boundaries(database: Path, writer: sqlite3.Connection) -> None:
    a = insert(writer, "s-a", 1, 2, 5, 9, 10)
    b = insert(writer, "s-b", 7, 8, 100)
    source = follower(database, page_size=2)
    batches = []
    while True:
        batch = source.poll()
        source.commit(batch)
        batches.append(batch)
        if not batch.more:
            break

    assert all(len(batch.records) <= 2 for batch in batches)
    assert len(batches) == 4
    assert by_key([r for batch in batches for r in batch.records]) == {b"s-a": a, b"s-b": b}
    assert drain(source) == []


def test_only_new_events_are_sent(database: Path, writer: sqlite3.Connection) -> None:
    insert(writer, "s-a", 1, 2)
    source = follower(database)
    drain(source)

    new = insert(writer, "s-a", 3) + insert(writer, "s-c", 1)

    assert drain(source) == [(b"s-a", new[0]), (b"s-c", new[1])]


def test_a_restart_from_the_checkpoint_neither_loses_nor_resends(
    database: Path, writer: sqlite3.Connection
) -> None:
    insert(writer, "s-a", 1, 2, 3)
    drain(follower(database, page_size=2))

    new = insert(writer, "s-a", 4, 5)

    assert drain(follower(database, page_size=2)) == [(b"s-a", seq) for seq in new]
    checkpoint = orjson.loads(database.with_name("sqlite.checkpoint.json").read_bytes())
    assert checkpoint["sessions"] == {"s-a": 5}


def test_events_polled_but_never_committed_are_read_again(
    database: Path, writer: sqlite3.Connection
) -> None:
    events = insert(writer, "s-a", 1, 2)
    follower(database).poll()  # the send failed: no commit

    assert drain(follower(database)) == [(b"s-a", e) for e in events]


def test_a_writer_holding_a_write_transaction_does_not_block_the_reader(
    database: Path, writer: sqlite3.Connection
) -> None:
    committed = insert(writer, "s-a", 1)
    source = follower(database)
    writer.execute("BEGIN IMMEDIATE")
    pending = insert(writer, "s-a", 2)

    assert drain(source) == [(b"s-a", committed[0])]

    writer.execute("COMMIT")
    assert drain(source) == [(b"s-a", pending[0])]


def test_the_reader_holds_no_transaction_between_polls(
    database: Path, writer: sqlite3.Connection
) -> None:
    insert(writer, "s-a", *range(1, 50))
    source = follower(database, page_size=10)
    batch = source.poll()

    assert batch.more
    assert not source._connect().in_transaction
    # A reader's open snapshot would make a TRUNCATE checkpoint report itself blocked.
    busy, _, _ = writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0


async def test_events_appended_while_the_poller_runs_all_arrive_in_order(
    database: Path, writer: sqlite3.Connection
) -> None:
    sessions = ("s-a", "s-b", "s-c")
    expected: dict[bytes, list[bytes]] = {s.encode(): [] for s in sessions}
    total = 150

    def write() -> None:
        for n in range(total):
            session = sessions[n % 3]
            expected[session.encode()] += insert(writer, session, n // 3 + 1)
            if n % 10 == 0:
                threading.Event().wait(0.005)

    sent: list[Record] = []
    stop = asyncio.Event()

    async def send(records: list[Record]) -> None:
        sent.extend(records)
        if len(sent) >= total:
            stop.set()

    source = follower(database, page_size=7)
    poller = asyncio.create_task(pump(source, send, poll_interval=0.005, once=False, stop=stop))
    await asyncio.to_thread(write)
    await asyncio.wait_for(poller, 20)

    assert by_key(sent) == expected


def test_a_reader_connection_cannot_write(database: Path, writer: sqlite3.Connection) -> None:
    insert(writer, "s-a", 1)
    source = follower(database)
    drain(source)

    with pytest.raises(sqlite3.OperationalError):
        source._connect().execute("DELETE FROM transcript_events")


def test_nothing_new_costs_one_pragma(database: Path, writer: sqlite3.Connection) -> None:
    insert(writer, "s-a", 1)
    source = follower(database)
    source.commit(source.poll())
    statements: list[str] = []
    source._connect().set_trace_callback(statements.append)

    assert source.poll().records == []

    assert statements == ["PRAGMA data_version"]


def test_a_deleted_session_is_forgotten(database: Path, writer: sqlite3.Connection) -> None:
    insert(writer, "s-a", 1)
    insert(writer, "s-b", 1)
    # Appends tell no deletion: the whole-store read of every poll interval does.
    source = follower(database, poll_interval=0)  # every poll the whole-store read
    drain(source)

    writer.execute("DELETE FROM transcript_events WHERE session_id = 's-a'")
    drain(source)

    assert source.progress.last_seq == {"s-b": 1}


# --- compressed events -----------------------------------------------------------------------


def fake_zstd(data: bytes, size: int | None) -> bytes:
    """zlib standing in for zstd: the follower only routes bytes to the codec."""
    decoded = zlib.decompress(data)
    assert size == len(decoded)
    return decoded


@pytest.fixture
def compressed_store(database: Path):
    connection = create_store(database, COMPRESSED_SCHEMA)
    plain = event("s-a", 1)
    packed = event("s-a", 2).encode()
    connection.execute(
        "INSERT INTO transcript_events (session_id, seq, event_json, created_at) VALUES (?,?,?,?)",
        ("s-a", 1, plain, 1),
    )
    connection.execute(
        "INSERT INTO transcript_events (session_id, seq, event_zstd, event_utf8_bytes, created_at)"
        " VALUES (?,?,?,?,?)",
        ("s-a", 2, zlib.compress(packed), len(packed), 2),
    )
    yield [plain.encode(), packed]
    connection.close()


def test_compressed_events_go_through_the_codec(
    database: Path, compressed_store: list[bytes]
) -> None:
    assert drain(follower(database, decompress=fake_zstd)) == [
        (b"s-a", value) for value in compressed_store
    ]


def test_a_compressed_event_without_a_codec_fails_naming_the_package(
    database: Path, compressed_store: list[bytes]
) -> None:
    with pytest.raises(SourceError, match=r"seq 2 .*install the `zstandard` package"):
        drain(follower(database, decompress=None))


def test_a_corrupt_compressed_event_fails_clearly(
    database: Path, compressed_store: list[bytes]
) -> None:
    def broken(data: bytes, size: int | None) -> bytes:
        raise ValueError("bad frame")

    with pytest.raises(SourceError, match=r"seq 2 .*cannot decompress event_zstd: bad frame"):
        drain(follower(database, decompress=broken))


def test_an_event_with_no_payload_is_skipped_with_a_warning(
    database: Path, caplog: pytest.LogCaptureFixture
) -> None:
    connection = create_store(database, COMPRESSED_SCHEMA)
    connection.execute(
        "INSERT INTO transcript_events (session_id, seq, created_at) VALUES ('s-a', 1, 0)"
    )
    last = insert(connection, "s-a", 2)

    with caplog.at_level(logging.WARNING):
        assert drain(follower(database)) == [(b"s-a", last[0])]
    assert "seq 1 has no event" in caplog.text
    connection.close()


def test_real_zstd_events_are_decompressed(database: Path) -> None:
    connection = create_store(database, COMPRESSED_SCHEMA)
    packed = event("s-a", 1).encode()
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(packed)
    connection.execute(
        "INSERT INTO transcript_events (session_id, seq, event_zstd, event_utf8_bytes, created_at)"
        " VALUES ('s-a', 1, ?, ?, 0)",
        (frame, len(packed)),
    )

    assert drain(follower(database, decompress=zstd_decompressor())) == [(b"s-a", packed)]
    connection.close()


def test_zstd_is_found_only_where_a_module_provides_it() -> None:
    available = any(
        importlib.util.find_spec(name) is not None for name in ("zstandard", "compression")
    )
    assert (zstd_decompressor() is not None) == available


# --- what cannot be read ---------------------------------------------------------------------


def test_a_missing_database_is_reported_and_not_created(database: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        follower(database)
    assert not database.exists()


def test_a_database_without_the_table_is_reported(database: Path) -> None:
    connection = sqlite3.connect(database)
    connection.execute("CREATE TABLE other (x)")
    connection.close()

    with pytest.raises(SourceError, match="has no transcript_events table"):
        drain(follower(database))


def test_page_size_must_be_positive() -> None:
    parser = argparse.ArgumentParser()
    follow_sqlite.add_arguments(parser)

    with pytest.raises(SystemExit):
        parser.parse_args(["db.sqlite", "--page-size", "0"])
