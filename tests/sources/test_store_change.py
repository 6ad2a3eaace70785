"""A commit to the store wakes both sources: a row no event announces does not wait for the poll.

Every source here polls the whole store once a minute, so a row that arrives within the test's
few seconds came by the store's change counter (`TranscriptStore.changed`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from stream.sources.base import Record, Source
from stream.sources.gateway.protocol import Auth
from stream.sources.gateway.source import Gateway, GatewaySource
from stream.sources.gateway.stores import Stores
from stream.sources.publish import pump
from stream.sources.sqlite import SqliteFollower
from stream.sources.store.changes import BUSY_SECONDS, BUSY_SPEEDUP, ChangeLooks
from tests.support.fake_gateway import TOKEN, FakeGateway, running, session_message
from tests.support.sources import by_key, drain
from tests.support.sqlite_store import (
    create_openclaw_store,
    create_store,
    insert,
    open_window,
    rotate,
)

LONG = 60.0  # seconds: no whole-store read by the clock within a test
KEY = "agent:main:explicit:s"


class Sent:
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.grew = asyncio.Event()

    async def send(self, records: list[Record]) -> None:
        self.records.extend(records)
        self.grew.set()

    async def until(self, count: int, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.records) < count:
                self.grew.clear()
                await self.grew.wait()


@asynccontextmanager
async def pumping(source: Source) -> AsyncIterator[Sent]:
    sent = Sent()
    stop = asyncio.Event()
    task = asyncio.create_task(pump(source, sent.send, poll_interval=LONG, once=False, stop=stop))
    try:
        yield sent
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
        source.close()


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "openclaw-agent.sqlite"


@pytest.fixture
def writer(database: Path):
    connection = create_store(database)
    yield connection
    connection.close()


def follower(database: Path, **intervals: float) -> SqliteFollower:
    return SqliteFollower(database, database.with_name("checkpoint.json"), 500, None,
                          poll_interval=LONG, **intervals)


async def test_follow_sqlite_reads_a_commit_at_once_with_a_long_poll_interval(
    database: Path, writer: sqlite3.Connection
) -> None:
    first = insert(writer, "s-a", 1)
    async with pumping(follower(database)) as sent:
        await sent.until(1)  # the whole-store read at start
        later = insert(writer, "s-b", 1) + insert(writer, "s-a", 2)
        await sent.until(3)

    assert by_key(sent.records) == {b"s-a": [*first, later[1]], b"s-b": [later[0]]}


async def test_without_the_change_signal_the_commit_waits_for_the_poll(
    database: Path, writer: sqlite3.Connection
) -> None:
    """The near miss of the test above: what brought the row there was the change counter."""
    insert(writer, "s-a", 1)
    async with pumping(follower(database, change_interval=LONG)) as sent:
        await sent.until(1)
        insert(writer, "s-a", 2)
        with pytest.raises(TimeoutError):
            await sent.until(2, timeout=0.5)


def test_a_wake_reads_only_the_sessions_appended_to(
    database: Path, writer: sqlite3.Connection
) -> None:
    insert(writer, "s-a", 1)
    insert(writer, "s-b", 1)
    source = follower(database)
    drain(source)
    new = insert(writer, "s-b", 2)
    statements: list[str] = []
    source._connect().set_trace_callback(statements.append)

    assert [record[1] for record in drain(source)] == new

    assert not any("GROUP BY" in statement for statement in statements)  # no whole-store read
    assert sum("s-a" in statement for statement in statements) == 0


def test_a_rewrite_in_place_comes_with_the_whole_store_read(
    tmp_path: Path,
) -> None:
    """An exact rewrite appends nothing, so the wake's read cannot see it; the poll's does."""
    store = tmp_path / "openclaw-agent.sqlite"
    writer = create_openclaw_store(store)
    open_window(writer, "s", KEY)
    insert(writer, "s", 0, 1, 2)
    source = SqliteFollower(store, tmp_path / "checkpoint.json", 500, None, poll_interval=0)
    drain(source)
    with writer:  # what an exact rewrite does: the row changed where it is, in one transaction
        writer.execute("UPDATE transcript_events SET event_json = 'rewritten' WHERE seq = 2")
        rotate(writer, "s")

    resent = drain(source)

    assert [record[1] for record in resent][-1] == b"rewritten"


def test_rows_deleted_from_the_top_make_the_wake_read_the_whole_store(
    database: Path, writer: sqlite3.Connection
) -> None:
    """A rowid is given again once the top rows are gone: above the old top is no longer new."""
    insert(writer, "s-a", 1)
    insert(writer, "s-b", 1, 2)
    source = follower(database)
    drain(source)
    writer.execute("DELETE FROM transcript_events WHERE session_id = 's-b'")
    again = insert(writer, "s-c", 1)  # takes a rowid at or below the old top

    assert [record[1] for record in drain(source)] == again
    assert source.progress.last_seq == {"s-a": 1, "s-c": 1}


def gateway_store(tmp_path: Path) -> sqlite3.Connection:
    """The main agent's store under `tmp_path / "state"`, with session "s" open."""
    store = tmp_path / "state" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    writer = create_openclaw_store(store)
    open_window(writer, "s", KEY)
    return writer


def gateway_source(tmp_path: Path, gateway: FakeGateway, **intervals: float) -> GatewaySource:
    """A gateway source over `gateway_store(tmp_path)` whose store poll never comes in a test."""
    return GatewaySource(
        Gateway(gateway.url, lambda: Auth(token=TOKEN), 5.0, backoff=(0.05, 0.2)),
        Stores.of(tmp_path / "state", None, []),
        tmp_path / "gateway.checkpoint.json",
        poll_interval=LONG,
        page_size=500,
        decompress=None,
        **intervals,
    )


async def test_the_gateway_source_reads_a_row_that_came_with_no_event(tmp_path: Path) -> None:
    writer = gateway_store(tmp_path)
    header = insert(writer, "s", 0)
    async with (running(FakeGateway()) as gateway,
                pumping(gateway_source(tmp_path, gateway)) as sent):
        await asyncio.wait_for(gateway.subscribed.wait(), 5)
        await sent.until(1)  # the sweep after connecting
        custom = insert(writer, "s", 1)  # OpenClaw's custom row after a reply: no event
        await sent.until(2)

    assert [record[1] for record in sent.records] == header + custom
    writer.close()


def test_a_store_written_to_is_looked_at_more_often_until_it_is_left_alone() -> None:
    now = 100.0
    looks = ChangeLooks(0.05, clock=lambda: now)
    assert looks.next_wait() == 0.05  # never written to: the idle interval

    looks.written()
    assert looks.next_wait() == pytest.approx(0.05 / BUSY_SPEEDUP)
    now += BUSY_SECONDS * 0.9
    assert looks.next_wait() == pytest.approx(0.05 / BUSY_SPEEDUP)

    now += BUSY_SECONDS * 0.2
    assert looks.next_wait() == 0.05


async def test_a_commit_told_of_ends_an_idle_wait_at_once() -> None:
    looks = ChangeLooks(LONG)
    waiting = asyncio.create_task(looks.wait())
    await asyncio.sleep(0.05)
    assert not waiting.done()  # a store left alone waits the idle interval

    looks.written()

    await asyncio.wait_for(waiting, 1)


async def test_the_gateway_source_reads_a_row_with_no_event_soon_after_an_event(
    tmp_path: Path,
) -> None:
    """OpenClaw writes a reply's custom rows right after it, with no event of their own: the
    reply's event makes the source look at the counter within change_interval / BUSY_SPEEDUP
    (1 s here) rather than change_interval (5 s)."""
    writer = gateway_store(tmp_path)
    header = insert(writer, "s", 0)
    async with (running(FakeGateway()) as gateway,
                pumping(gateway_source(tmp_path, gateway, change_interval=5.0)) as sent):
        await asyncio.wait_for(gateway.subscribed.wait(), 5)
        await sent.until(1)  # the sweep after connecting
        reply = insert(writer, "s", 1)
        await gateway.emit(session_message("main", "s", KEY, 1))
        await sent.until(2)
        # The event may come after the sweep that follows the connection read the reply:
        # its own read is done by now, and the next row can only come by a look.
        await asyncio.sleep(0.3)
        custom = insert(writer, "s", 2)
        started = time.monotonic()
        await sent.until(3)
        waited = time.monotonic() - started

    assert [record[1] for record in sent.records] == header + reply + custom
    assert waited < 2.5
    writer.close()
