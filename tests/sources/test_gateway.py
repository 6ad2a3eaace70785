"""The gateway source against a fake gateway (real frames) and a store in OpenClaw's schema."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from websockets.asyncio.server import serve

from stream.brokers import free_port
from stream.sources.base import Record, SourceError
from stream.sources.gateway.projection import ProjectedSource
from stream.sources.gateway.protocol import Auth
from stream.sources.gateway.source import Gateway, GatewaySource
from stream.sources.gateway.stores import Stores
from stream.sources.publish import pump
from tests.support.fake_gateway import (
    REFUSALS,
    TOKEN,
    FakeGateway,
    running,
    session_message,
    sessions_changed,
    unavailable,
)
from tests.support.sqlite_store import create_openclaw_store, insert, open_window

KEY = "agent:main:explicit:s"
STORE = "openclaw-agent.sqlite"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def writer(state: Path):
    store = state / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    connection = create_openclaw_store(store)
    open_window(connection, "s", KEY)
    yield connection
    connection.close()


def source(
    state: Path, url: str, *, deadline: float = 5.0, token: str = TOKEN, agents: tuple = (),
    change_interval: float = 60,
) -> GatewaySource:
    """By default no sweep by the clock and no look at the store's change counter: what arrives
    came by event (or by the sweep after connecting)."""
    gateway = Gateway(url, lambda: Auth(token=token), deadline, backoff=(0.05, 0.2))
    return GatewaySource(
        gateway,
        Stores.of(state, None, list(agents)),
        state.parent / "gateway.checkpoint.json",
        poll_interval=60,
        page_size=500,
        decompress=None,
        change_interval=change_interval,
    )


class Pumped:
    def __init__(self) -> None:
        self.sent: list[Record] = []
        self.changed = asyncio.Event()

    async def send(self, records: list[Record]) -> None:
        self.sent.extend(records)
        self.changed.set()

    async def until(self, test: Callable[[list[Record]], bool], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not test(self.sent):
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), max(0.01, deadline - time.monotonic()))

    def values(self) -> list[bytes]:
        return [record[1] for record in self.sent]


@asynccontextmanager
async def pumping(src) -> AsyncIterator[tuple[Pumped, asyncio.Task]]:
    pumped = Pumped()
    stop = asyncio.Event()
    task = asyncio.create_task(pump(src, pumped.send, poll_interval=60, once=False, stop=stop))
    try:
        yield pumped, task
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
        src.close()


async def test_the_handshake_is_a_read_only_backend_operator_with_the_token(
    state: Path, writer: sqlite3.Connection
) -> None:
    async with running(FakeGateway()) as gateway, pumping(source(state, gateway.url)):
        await asyncio.wait_for(gateway.subscribed.wait(), 5)

    [params] = gateway.connects
    assert params["minProtocol"] == params["maxProtocol"] == 4
    assert params["client"]["id"] == "gateway-client"
    assert params["client"]["mode"] == "backend"
    assert params["role"] == "operator"
    assert params["scopes"] == ["operator.read"]
    assert params["auth"] == {"token": TOKEN}
    assert gateway.requests == ["sessions.subscribe"]


async def test_an_event_publishes_the_sessions_new_rows_at_once(
    state: Path, writer: sqlite3.Connection
) -> None:
    first = insert(writer, "s", 0, 1)
    async with running(FakeGateway()) as gateway, pumping(source(state, gateway.url)) as (
        pumped, _
    ):
        await asyncio.wait_for(gateway.subscribed.wait(), 5)
        await pumped.until(lambda sent: len(sent) == 2)  # the sweep after connecting
        new = insert(writer, "s", 2)
        started = time.monotonic()
        await gateway.emit(session_message("main", "s", KEY, 2))
        await pumped.until(lambda sent: len(sent) == 3, timeout=2)
        latency = time.monotonic() - started

    assert pumped.values() == first + new
    assert latency < 0.5  # not the 60 s poll interval
    assert dict(pumped.sent[2][2])["openclaw-session-key"] == KEY.encode()


async def test_sessions_changed_without_a_session_id_reads_the_whole_store(
    state: Path, writer: sqlite3.Connection
) -> None:
    async with running(FakeGateway()) as gateway, pumping(source(state, gateway.url)) as (
        pumped, _
    ):
        await asyncio.wait_for(gateway.subscribed.wait(), 5)
        open_window(writer, "t", "agent:main:main", previous="s", reason="reset")
        new = insert(writer, "t", 0)
        await gateway.emit(sessions_changed("main", None, "agent:main:main", "reset"))
        await pumped.until(lambda sent: len(sent) == 1)

    assert pumped.values() == new
    assert dict(pumped.sent[0][2])["openclaw-previous-session-id"] == b"s"


async def test_events_of_an_agent_not_followed_are_ignored(
    state: Path, writer: sqlite3.Connection
) -> None:
    async with running(FakeGateway()) as gateway, pumping(
        source(state, gateway.url, agents=("main",))
    ) as (pumped, _):
        await asyncio.wait_for(gateway.subscribed.wait(), 5)
        await asyncio.sleep(0.2)  # past the sweep that follows the connect
        insert(writer, "s", 0)
        await gateway.emit(session_message("other", "s", "agent:other:x", 0))
        await asyncio.sleep(0.3)

    assert pumped.sent == []


async def test_a_dropped_connection_loses_nothing_and_sends_nothing_twice(
    state: Path, writer: sqlite3.Connection
) -> None:
    before = insert(writer, "s", 0)
    async with running(FakeGateway()) as gateway, pumping(source(state, gateway.url)) as (
        pumped, _
    ):
        await asyncio.wait_for(gateway.subscribed.wait(), 5)
        await pumped.until(lambda sent: len(sent) == 1)
        await gateway.drop()
        # Written while the socket is down; its event went nowhere and is never replayed.
        during = insert(writer, "s", 1, 2)
        await asyncio.wait_for(gateway.subscribed.wait(), 5)
        await pumped.until(lambda sent: len(sent) == 3)
        after = insert(writer, "s", 3)
        await gateway.emit(session_message("main", "s", KEY, 3))
        await pumped.until(lambda sent: len(sent) == 4)

    assert pumped.values() == before + during + after
    assert len(gateway.connects) == 2


async def test_a_restart_from_the_checkpoint_sends_only_what_is_new(
    state: Path, writer: sqlite3.Connection
) -> None:
    insert(writer, "s", 0, 1)
    async with running(FakeGateway()) as gateway:
        async with pumping(source(state, gateway.url)) as (pumped, _):
            await pumped.until(lambda sent: len(sent) == 2)
        new = insert(writer, "s", 2)
        async with pumping(source(state, gateway.url)) as (pumped, _):
            await pumped.until(lambda sent: len(sent) == 1)
            await asyncio.sleep(0.2)

    assert pumped.values() == new


async def test_a_refused_token_is_one_line_with_the_url_and_the_code_after_the_deadline(
    state: Path, writer: sqlite3.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "not-the-token-s3cret"
    refusal = REFUSALS["AUTH_TOKEN_MISMATCH"]
    gateway = FakeGateway(answers=[refusal] * 100)
    async with running(gateway):
        started = time.monotonic()
        with caplog.at_level(logging.DEBUG), pytest.raises(SourceError) as failure:
            async with pumping(source(state, gateway.url, deadline=0.6, token=wrong)) as (_, t):
                await asyncio.wait_for(t, 5)
        waited = time.monotonic() - started

    message = str(failure.value)
    assert gateway.url in message
    assert "AUTH_TOKEN_MISMATCH (INVALID_REQUEST)" in message
    assert "start-up deadline" in message
    assert "\n" not in message
    assert 0.3 <= waited < 3
    assert len(gateway.connects) >= 2  # retried until the deadline
    assert wrong not in message and wrong not in caplog.text


async def test_a_gateway_of_another_protocol_is_named_as_such(
    state: Path, writer: sqlite3.Connection
) -> None:
    gateway = FakeGateway(answers=[REFUSALS["PROTOCOL_MISMATCH"]] * 100)
    async with running(gateway):
        with pytest.raises(SourceError, match="PROTOCOL_MISMATCH"):
            async with pumping(source(state, gateway.url, deadline=0.3)) as (_, task):
                await asyncio.wait_for(task, 5)


async def test_no_gateway_at_the_url_is_named_after_the_deadline(
    state: Path, writer: sqlite3.Connection
) -> None:
    async with running(FakeGateway()) as gateway:
        url = gateway.url
    with pytest.raises(SourceError, match=f"no gateway answers at {url}.*start-up deadline"):
        async with pumping(source(state, url, deadline=0.3)) as (_, task):
            await asyncio.wait_for(task, 5)


async def test_a_deadline_of_zero_waits_for_a_gateway_that_comes_late(
    state: Path, writer: sqlite3.Connection
) -> None:
    """What `session-stream up` runs: a gateway still booting minutes later is waited for."""
    port = free_port()
    late = FakeGateway()
    async with pumping(source(state, f"ws://127.0.0.1:{port}", deadline=0)) as (_, task):
        await asyncio.sleep(1.0)  # more than a few backoffs of these tests
        assert not task.done()
        async with serve(late._handle, "127.0.0.1", port):
            await asyncio.wait_for(late.subscribed.wait(), 10)
    assert len(late.connects) == 1


async def test_the_store_is_published_while_the_gateway_is_not_there(
    state: Path, writer: sqlite3.Connection
) -> None:
    rows = insert(writer, "s", 0, 1)
    async with running(FakeGateway()) as gateway:
        url = gateway.url
    async with pumping(source(state, url, deadline=30)) as (pumped, _):
        await pumped.until(lambda sent: len(sent) == 2)

    assert pumped.values() == rows


async def test_unavailable_is_retried_after_its_retry_after(
    state: Path, writer: sqlite3.Connection
) -> None:
    gateway = FakeGateway(answers=[unavailable(400)])
    async with running(gateway), pumping(source(state, gateway.url)):
        await asyncio.wait_for(gateway.subscribed.wait(), 5)

    first, second = gateway.connect_times
    # retryAfterMs, not the 50 ms backoff of these tests
    assert 0.38 <= second - first < 1.0


async def test_silence_past_two_ticks_closes_and_reconnects(
    state: Path, writer: sqlite3.Connection
) -> None:
    gateway = FakeGateway(tick_interval_ms=100, send_ticks=False)
    async with running(gateway), pumping(source(state, gateway.url)):
        await asyncio.sleep(0.8)

    assert len(gateway.connects) >= 2


async def test_ticks_keep_the_connection(state: Path, writer: sqlite3.Connection) -> None:
    gateway = FakeGateway(tick_interval_ms=100, send_ticks=True)
    async with running(gateway), pumping(source(state, gateway.url)):
        await asyncio.sleep(0.8)

    assert len(gateway.connects) == 1


async def test_projected_mode_publishes_the_event_marked_as_projected() -> None:
    async with running(FakeGateway()) as gateway:
        src = ProjectedSource(Gateway(gateway.url, lambda: Auth(token=TOKEN), 5))
        async with pumping(src) as (pumped, _):
            await asyncio.wait_for(gateway.subscribed.wait(), 5)
            await gateway.emit(session_message("main", "s", KEY, 1))
            await pumped.until(lambda sent: len(sent) == 1)

    [(key, value, headers)] = pumped.sent
    assert key == b"s"
    assert dict(headers)["openclaw-projection"] == b"display"
    assert b'"__sessionStream":{"projection":"display","messageSeq":1,"rawSeq":1}' in value
    assert b'"id":"6f3ec215-9ea6-4371-b114-82969e144311"' in value


def test_every_agent_of_the_state_folder_is_found(tmp_path: Path) -> None:
    stores = Stores.of(tmp_path, None, [])
    assert stores.found() == {}
    for agent in ("main", "ops"):
        create_openclaw_store(tmp_path / "agents" / agent / "agent" / "openclaw-agent.sqlite")

    assert set(stores.found()) == {"main", "ops"}
    assert set(Stores.of(tmp_path, None, ["ops"]).found()) == {"ops"}


def test_a_missing_state_folder_is_refused_naming_it_and_projected_mode(
    tmp_path: Path,
) -> None:
    with pytest.raises(SourceError, match=r"no OpenClaw state folder at .*/gone.*--projected"):
        Stores.of(tmp_path / "gone", None, [])


async def test_a_store_found_before_its_tables_is_waited_for_not_fatal(tmp_path: Path) -> None:
    """OpenClaw creates its store file a moment before its migration creates the tables: the
    source found in between keeps looking, then follows the store."""
    state = tmp_path / "state"
    path = state / "agents" / "main" / "agent" / STORE
    path.parent.mkdir(parents=True)
    sqlite3.connect(path).close()
    async with running(FakeGateway()) as gateway, pumping(source(state, gateway.url)) as (
        pumped, task
    ):
        await asyncio.wait_for(gateway.subscribed.wait(), 5)
        await gateway.emit(session_message("main", "s", KEY, 1))
        await asyncio.sleep(0.3)
        assert not task.done()
        writer = create_openclaw_store(path)
        rows = insert(writer, "s", 0, 1)
        await gateway.emit(session_message("main", "s", KEY, 1))
        await pumped.until(lambda sent: len(sent) == 2)
        writer.close()

    assert pumped.values() == rows


async def test_a_store_that_appears_later_is_followed_from_its_start(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    async with running(FakeGateway()) as gateway, pumping(source(state, gateway.url)) as (
        pumped, _
    ):
        await asyncio.wait_for(gateway.subscribed.wait(), 5)
        writer = create_openclaw_store(state / "agents" / "main" / "agent" / STORE)
        rows = insert(writer, "s", 0, 1)
        await gateway.emit(session_message("main", "s", KEY, 1))
        await pumped.until(lambda sent: len(sent) == 2)
        writer.close()

    assert pumped.values() == rows
