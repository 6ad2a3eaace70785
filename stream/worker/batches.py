"""The lane's handler: each fetched batch through the processor and on to the committer."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from faust.types import Message

from stream.settings import Settings
from stream.worker.lane import LaneApp
from stream.worker.processor import BatchProcessor

log = logging.getLogger(__name__)


def batch_handler(app: LaneApp, processor: BatchProcessor,
                  settings: Settings) -> Callable[[list[Message]], Awaitable[None]]:
    """A batch is processed, its state written to the tables at once, and handed to the
    app's committer, which returns once the batch before it is committed; every
    `ttl_sweep_interval` a batch also forgets the sessions idle longer than the TTL."""
    last_sweep = time.monotonic()

    async def clean(messages: list[Message]) -> None:
        # Runs inside Faust's fetcher: nothing may escape it. The engine dead-letters what it
        # cannot process, and delivery is retried until the broker has every record.
        nonlocal last_sweep
        started = time.monotonic()
        sweep = started - last_sweep >= settings.ttl_sweep_interval
        if sweep:
            last_sweep = started
        batch = processor.process(messages, time.time(), _owned(app, settings.input_topic),
                                  sweep)
        if batch.forgotten:
            log.info("forgot %d sessions idle longer than %ss", batch.forgotten,
                     settings.session_ttl)
        await app.committer.commit(batch, messages, started=started)

    return clean


def _owned(app: LaneApp, topic: str) -> set[int]:
    return {tp.partition for tp in app.consumer.assignment() if tp.topic == topic}
