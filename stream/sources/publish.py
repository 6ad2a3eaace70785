"""What the live sources share: the poll, send, checkpoint loop and the command-line plumbing.

A source only reads: `poll()` says which records are new and where the source will stand once
they are delivered, without moving. The loop sends them through the producer of
`stream.sources.produce` (acks=all, a bounded window of unacknowledged sends) and only then calls
`commit()`, which moves the source and saves its checkpoint. A crash between the two re-sends
the batch on restart (at-least-once; the worker drops repeated entry ids), and never skips it.

A live source (`LiveSource`: the gateway source, follow-sqlite) also runs a watcher beside the
loop, which says when there is news (an event on the gateway's bus, a commit to the store); the
loop then polls at once instead of waiting for the next interval, but starts a round (poll,
send, commit) at most every ROUND_INTERVAL, so that news arriving faster goes out together.

A broker that goes away is waited for (`stream.kafka.retry`): the batch is sent again, with
backoff, until the broker acknowledges it, and only then checkpointed, so the source goes on
by itself when the broker is back, and what it sent twice is the same records, byte for byte.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TextIO, TypeVar, runtime_checkable

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from stream.kafka.admin import ensure_input_topic
from stream.kafka.producer import Headers, send_records, start_idempotent_producer
from stream.kafka.retry import Backoff, Stopped, quiet_client_logs, until_done
from stream.progress import DEFAULT_INTERVAL, Progress
from stream.settings import Settings, add_options
from stream.sources.positions import PositionsError

# (key, value), or (key, value, headers) for a source that knows more than the key.
Record = tuple[bytes, bytes] | tuple[bytes, bytes, Headers]
Send = Callable[[list[Record]], Awaitable[object]]
P = TypeVar("P")
DEFAULT_POLL_INTERVAL = 1.0
# Seconds between the starts of two rounds of a live source at least. News can come every few
# ms (an event per message, a look at the store's counter every 10 ms while it is written to),
# and each round costs a produce request, a record batch per partition it touches and a
# checkpoint write. The broker pays for the batches at every fetch after (Tansu's in-memory
# store lists a partition's batches on each), so at 200 rows/s in bench's source latency run
# the gateway source's p99 was 120-164 ms with rounds every 10 ms (80 a second), 110-117 every
# 20 ms (47), 90-100 every 30 ms (32) and 112-143 every 40 ms, p50 52-56 ms but for the last
# (60): a row waits for its round before its read, where it waited for the producer's 10 ms
# linger after it (docs/performance.md).
ROUND_INTERVAL = 0.03


class SourceError(RuntimeError):
    """The source cannot go on: its input is missing, unreadable or needs a missing module."""


@dataclass(frozen=True)
class Batch(Generic[P]):
    records: list[Record]
    position: P  # where the source stands once `records` are acknowledged
    more: bool = False  # a read limit cut the batch short: poll again without waiting


class Source(Protocol[P]):
    def poll(self) -> Batch[P]: ...

    def commit(self, batch: Batch[P]) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class LiveSource(Source[P], Protocol[P]):
    async def watch(self, news: asyncio.Event, stop: asyncio.Event) -> None:
        """Runs beside `pump` until `stop`; sets `news` when a poll may find something.

        Raises SourceError when the source cannot go on; `pump` then stops with it.
        """
        ...


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


def add_source_arguments(parser: argparse.ArgumentParser, default_checkpoint: str) -> None:
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=Path(default_checkpoint),
        metavar="FILE",
        help="where the position is kept across restarts (default %(default)s)",
    )
    parser.add_argument(
        "--poll-interval",
        type=_positive_seconds,
        default=DEFAULT_POLL_INTERVAL,
        metavar="S",
        help="seconds between looks for new data (default %(default)s)",
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="publish what is there now, then exit (for tests and cron)",
    )
    add_progress_argument(parser)
    add_options(parser, ("broker", "partitions", "replication", "input_topic"))


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress-interval",
        type=_positive_seconds,
        default=DEFAULT_INTERVAL,
        metavar="S",
        help="log what was done every this many seconds, when something was "
        "(default %(default)s), and once more on stop",
    )


def _positive_seconds(text: str) -> float:
    seconds = float(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return seconds


def run(
    name: str,
    open_source: Callable[[], Source[P]],
    args: argparse.Namespace,
    stderr: TextIO | None = None,
) -> int:
    """The body of a source command's main(): exit 0 when stopped or done, 1 on any failure."""
    stderr = stderr or sys.stderr
    logging.basicConfig(
        level=logging.INFO, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s"
    )
    quiet_client_logs()
    settings = Settings.load(args)
    try:
        source = open_source()
    except (PositionsError, SourceError) as error:
        print(f"session-stream {name}: {error}", file=stderr)
        return 1
    progress = Progress(name, args.progress_interval)
    try:
        ensure_input_topic(settings)
        sent = asyncio.run(publish(settings, source, args.poll_interval, args.once, progress))
    except KafkaError as error:
        print(
            f"session-stream {name}: cannot publish to the Kafka broker at "
            f"{settings.bootstrap}: {error}",
            file=stderr,
        )
        return 1
    except (SourceError, OSError) as error:
        print(f"session-stream {name}: {error}", file=stderr)
        return 1
    finally:
        source.close()
    if not args.once:
        progress.stopped()
    print(f"session-stream {name}: published {sent} records to {settings.input_topic}", file=stderr)
    return 0
