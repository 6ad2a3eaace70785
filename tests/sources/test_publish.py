"""The loop the sources share."""

from __future__ import annotations

import asyncio

import pytest

from stream.sources.publish import Batch, Record, pump
from tests.support.sources import ScriptedSource, records


async def test_once_polls_again_while_batches_say_more_then_stops() -> None:
    source = ScriptedSource(
        [Batch(records(b"1", b"2"), 1, more=True), Batch(records(b"3"), 2), Batch(records(b"4"), 3)]
    )
    sent: list[Record] = []

    async def send(batch: list[Record]) -> None:
        sent.extend(batch)

    assert await pump(source, send, poll_interval=60, once=True) == 3

    assert sent == records(b"1", b"2", b"3")
    assert source.committed == [1, 2]


async def test_a_failed_send_commits_nothing() -> None:
    source = ScriptedSource([Batch(records(b"1"), 1)])

    async def send(batch: list[Record]) -> None:
        raise ConnectionError("broker gone")

    with pytest.raises(ConnectionError):
        await pump(source, send, poll_interval=60, once=True)

    assert source.committed == []


async def test_empty_batches_are_committed_without_sending() -> None:
    source = ScriptedSource([Batch([], 5)])

    async def send(batch: list[Record]) -> None:
        raise AssertionError("nothing to send")

    assert await pump(source, send, poll_interval=60, once=True) == 0
    assert source.committed == [5]


async def test_without_once_it_polls_every_interval_until_stopped() -> None:
    source = ScriptedSource([Batch(records(b"1"), 1)])
    stop = asyncio.Event()

    async def send(batch: list[Record]) -> None:
        pass

    running = asyncio.create_task(pump(source, send, poll_interval=0.01, once=False, stop=stop))
    await asyncio.sleep(0.2)
    stop.set()

    assert await asyncio.wait_for(running, 5) == 1
    assert source.polls > 3
