"""The loop the sources share."""

from __future__ import annotations

import asyncio

import pytest

from stream.sources.base import Batch, Record
from stream.sources.publish import pump
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


class Busy:
    """A live source with news every millisecond and a record at every poll."""

    def __init__(self) -> None:
        self.polls = 0

    def poll(self) -> Batch[int]:
        self.polls += 1
        return Batch(records(b"%d" % self.polls), self.polls)

    def commit(self, batch: Batch[int]) -> None:
        pass

    def close(self) -> None:
        pass

    async def watch(self, news: asyncio.Event, stop: asyncio.Event) -> None:
        while not stop.is_set():
            news.set()
            await asyncio.sleep(0.001)


async def rounds_in(seconds: float, source: Busy, round_interval: float) -> int:
    stop = asyncio.Event()

    async def send(batch: list[Record]) -> None:
        pass

    running = asyncio.create_task(pump(source, send, poll_interval=60, once=False, stop=stop,
                                       round_interval=round_interval))
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.wait_for(running, 5)
    return source.polls


async def test_news_faster_than_the_round_interval_is_read_a_round_at_a_time() -> None:
    polls = await rounds_in(0.5, Busy(), round_interval=0.05)

    # one round at the start and one per 50 ms after it, not one per piece of news
    assert 3 <= polls <= 11


async def test_without_a_round_interval_every_piece_of_news_starts_a_round() -> None:
    """The near miss of the test above: it was the interval that held the rounds back."""
    assert await rounds_in(0.5, Busy(), round_interval=0) > 30


async def test_a_batch_cut_short_is_read_on_at_once_whatever_the_round_interval() -> None:
    source = ScriptedSource([
        Batch(records(b"1"), 1, more=True), Batch(records(b"2"), 2, more=True),
        Batch(records(b"3"), 3),
    ])
    stop = asyncio.Event()
    sent: list[Record] = []

    async def send(batch: list[Record]) -> None:
        sent.extend(batch)

    running = asyncio.create_task(pump(source, send, poll_interval=60, once=False, stop=stop,
                                       round_interval=30))
    async with asyncio.timeout(2):
        while source.committed != [1, 2, 3]:
            await asyncio.sleep(0.01)
    stop.set()

    assert await asyncio.wait_for(running, 2) == 3  # the stop did not wait out the interval
    assert sent == records(b"1", b"2", b"3")
