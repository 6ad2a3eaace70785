"""What every component does when the broker goes away and comes back: one policy.

The rule: a component retries its sends and commits, with backoff, until the broker is back,
and moves its own checkpoint (a source's file positions, the memory writer's offsets, the
worker's acks to Faust) only after the broker acknowledged what the checkpoint covers. A
retry can therefore only repeat records the broker may already have, byte for byte, after
them in the topic; it never skips one. Nothing exits because the broker is away:

- a source (`follow`, `follow-sqlite`) keeps the batch it read and sends it again until it is
  acknowledged (`stream.sources.publish.pump`), then checkpoints;
- the memory writer keeps fetching and retries its commit (`stream.consumers.memory_writer`);
  its files are idempotent on entry id, so records delivered again write nothing;
- the worker's deliveries retry until acknowledged (`stream.kafka.producer.deliver_until_done`),
  Faust's consumer reconnects and rejoins its group by itself, and the stall watchdog does not
  take a broker that does not answer for a stall (`stream.worker.app`).

Only errors no retry cures end a process, with a message and exit code 1: a refused login or
certificate, a missing permission, a broker too old, a record larger than the broker accepts
where nothing can stand in for it. At start-up a command that finds no broker still exits 1
(the worker after `--startup-deadline`), for its supervisor to start it again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiokafka.errors import KafkaError, KafkaTimeoutError

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 30.0
# aiokafka logs a failed connection attempt up to ten times a second while the broker is away;
# each of its messages is logged once per this many seconds instead (quiet_client_logs).
REPEAT_WINDOW_S = 10.0


class Stopped(Exception):
    """The component was told to stop while it waited for the broker."""


def curable(error: BaseException) -> bool:
    """A failure that waiting for the broker can cure: it is away, restarting, electing a
    leader, or moving a group coordinator. aiokafka marks those retriable; its own timeouts
    (no metadata, a full buffer, an expired batch) are not marked but are the same thing."""
    return isinstance(error, KafkaError) and (error.retriable
                                              or isinstance(error, KafkaTimeoutError))


class Backoff:
    """Delays that double from FIRST_DELAY_S to MAX_DELAY_S; `reset()` after a success."""

    def __init__(self, first: float = FIRST_DELAY_S, most: float = MAX_DELAY_S) -> None:
        self.first, self.most = first, most
        self.delay = first
        self.failures = 0

    def next(self) -> float:
        delay = self.delay
        self.delay = min(self.delay * 2, self.most)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.delay = self.first
        self.failures = 0


async def until_done(
    attempt: Callable[[], Awaitable[T]],
    what: str,
    *,
    broker: str,
    stop: asyncio.Event | None = None,
    backoff: Backoff | None = None,
) -> T:
    """Await `attempt()` until it succeeds, retrying curable failures with backoff and a log
    line each (what failed, the broker, the error, the delay); other errors propagate.

    `attempt` must be safe to repeat: everything the project retries is, by the rule above.
    Raises Stopped when `stop` is set while waiting for the next try.
    """
    backoff = backoff or Backoff()
    while True:
        try:
            result = await attempt()
        except Exception as error:
            if not curable(error):
                raise
            delay = backoff.next()
            log.warning("%s failed: the broker at %s did not take it (%s); retrying in "
                        "%.1fs (attempt %d)", what, broker, error, delay, backoff.failures)
            if await _stopped_within(stop, delay):
                raise Stopped(what) from error
            continue
        if backoff.failures:
            log.warning("%s succeeded after %d failed attempts", what, backoff.failures)
        return result


async def _stopped_within(stop: asyncio.Event | None, seconds: float) -> bool:
    if stop is None:
        await asyncio.sleep(seconds)
        return False
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        return False
    return True


class _OncePerWindow(logging.Filter):
    """Passes a warning or error once per `window` seconds per logger and message template;
    the next one passed says how many were left out."""

    def __init__(self, window: float) -> None:
        super().__init__()
        self.window = window
        self.last: dict[tuple[str, str], float] = {}
        self.left_out: Counter[tuple[str, str]] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, str(record.msg))
        now = time.monotonic()
        last = self.last.get(key)
        if last is not None and now - last < self.window:
            self.left_out[key] += 1
            return False
        self.last[key] = now
        count = self.left_out.pop(key, 0)
        if count and isinstance(record.msg, str):
            record.msg += f" ({count} more like this since the last one, not logged)"
        return True


def quiet_client_logs(window: float = REPEAT_WINDOW_S) -> None:
    """While the broker is away, log each of aiokafka's warnings and errors once per `window`
    seconds, not on every reconnection attempt (hundreds of lines per minute otherwise)."""
    # Importing aiokafka (this module does) made all of its loggers.
    once = _OncePerWindow(window)
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if (name == "aiokafka" or name.startswith("aiokafka.")) and isinstance(
                logger, logging.Logger) and not any(
                isinstance(f, _OncePerWindow) for f in logger.filters):
            logger.addFilter(once)
