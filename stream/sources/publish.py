"""What the live sources share: the poll, send, checkpoint loop.

A source (`stream.sources.base`) only reads: `poll()` says which records are new and where the
source will stand once they are delivered, without moving. The loop sends them through an
idempotent producer (`stream.kafka.producer`: acks=all, a bounded window of unacknowledged sends)
and only then calls `commit()`, which moves the source and saves its checkpoint. A crash between
the two re-sends the batch on restart (at-least-once; the worker drops repeated entry ids), and
never skips it.

A live source (`LiveSource`: the gateway source, follow-sqlite) also runs a watcher beside the
loop, which says when there is news (an event on the gateway's bus, a commit to the store); the
loop then polls at once instead of waiting for the next interval, but starts a round (poll,
send, commit) at most every ROUND_INTERVAL, so that news arriving faster goes out together.

A broker that goes away is waited for (`stream.kafka.retry`): the batch is sent again, with
backoff, until the broker acknowledges it, and only then checkpointed, so the source goes on
by itself when the broker is back, and what it sent twice is the same records, byte for byte.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress

from aiokafka import AIOKafkaProducer

from stream.kafka.producer import send_records, start_idempotent_producer
from stream.kafka.retry import Backoff, Stopped, until_done
from stream.progress import Progress
from stream.settings import Settings
from stream.sources.base import LiveSource, P, Record, Source

Send = Callable[[list[Record]], Awaitable[object]]
# Seconds between the starts of two rounds of a live source at least: each round costs a produce
# request, a record batch per partition it touches and a checkpoint write, and news can come
# every few ms. What other intervals gave: docs/performance.md, "No row waits for a poll".
ROUND_INTERVAL = 0.03


async def pump(
    source: Source[P],
    send: Send,
    *,
    poll_interval: float,
    once: bool,
    stop: asyncio.Event | None = None,
    broker: str = "",
    backoff: Backoff | None = None,
    round_interval: float = 0.0,
    progress: Progress | None = None,
) -> int:
    """Poll, send, commit until `stop` is set (or, with `once`, until nothing is left to read).

    A round that follows news or the poll interval starts `round_interval` after the one before
    it at the earliest; one that goes on with a batch cut short (`more`) starts at once.
    Returns the number of records sent, which `progress` counts as it goes. A send the
    broker's absence failed is repeated with
    `backoff` until it succeeds (stream.kafka.retry); a stop meanwhile leaves the batch
    uncommitted, for the next run to send. Any other failing send raises before the commit.
    """
    stop = stop or asyncio.Event()
    backoff = backoff or Backoff()
    news = asyncio.Event()
    watcher = None
    if isinstance(source, LiveSource) and not once:
        watcher = asyncio.create_task(source.watch(news, stop))
    sent = 0
    try:
        while not stop.is_set():
            news.clear()  # before the poll: news arriving during it is not lost
            started = time.monotonic()
            batch = source.poll()
            if batch.records:
                try:
                    await until_done(lambda: send(batch.records),  # noqa: B023 - awaited here
                                     f"sending {len(batch.records)} records", broker=broker,
                                     stop=stop, backoff=backoff)
                except Stopped:
                    break
                backoff.reset()
                sent += len(batch.records)
            source.commit(batch)
            if progress is not None:
                progress.add(records=len(batch.records))
            if batch.more:
                continue
            if once:
                break
            await _next_round(stop, news, watcher, poll_interval)
            if not stop.is_set():
                await _not_before(started + round_interval)
    finally:
        if watcher is not None:
            watcher.cancel()
            with suppress(asyncio.CancelledError):
                await watcher
    return sent


async def _next_round(
    stop: asyncio.Event, news: asyncio.Event, watcher: asyncio.Task | None, timeout: float
) -> None:
    """Waits for a stop, news, or the poll interval; raises what a failed watcher raised."""
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(news.wait())]
    try:
        await asyncio.wait(
            [*waits, *([watcher] if watcher is not None else [])],
            timeout=timeout,
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:
        for wait in waits:
            wait.cancel()
    if watcher is not None and watcher.done():
        watcher.result()  # raises its error; a watcher only returns once stopped


async def start_source_producer(settings: Settings) -> AIOKafkaProducer:
    """Idempotent where the broker grants it: a send the producer retries in one run writes no
    second input record. A round's records are sent at once and awaited: lingering would only
    hold them back (10 ms a row, and the next round's rows behind them)."""
    return await start_idempotent_producer(settings, linger_ms=0)


async def _not_before(moment: float) -> None:
    """Waits until `moment` (time.monotonic()); news meanwhile is read by the round after."""
    delay = moment - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


async def publish(settings: Settings, source: Source[P], poll_interval: float, once: bool,
                  progress: Progress | None = None) -> int:
    """Run `pump` with the shared producer until done or SIGINT/SIGTERM; returns records sent."""
    producer: AIOKafkaProducer | None = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Stopping between batches lets the last acknowledged batch be checkpointed, so a
    # container stop does not cause re-sends.
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop.set)
    try:
        producer = await start_source_producer(settings)
        return await pump(source, _sender(producer, settings.input_topic),
                          poll_interval=poll_interval, once=once, stop=stop,
                          broker=settings.bootstrap, round_interval=ROUND_INTERVAL,
                          progress=progress)
    finally:
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(number)
        if producer is not None:
            await producer.stop()


def _sender(producer: AIOKafkaProducer, topic: str) -> Send:
    async def send(records: list[Record]) -> None:
        await send_records(producer, topic, records)

    return send
