"""The stall watch: a worker with work to do that makes no progress exits to be restarted.

Faust can stop feeding an agent after a rebalance while its partitions still hold records
(seen here with a worker rejoining a group). A worker that has work but makes no progress for
`stall_timeout` exits with code 3 so its supervisor restarts it; processing is replay-safe, so
the restart loses and doubles nothing.

A broker that does not answer is no stall (stream.kafka.retry): Faust's consumer and the
deliveries wait for it, and a restart would only wait too (or give up at start-up). The stall
clock starts again when the broker answers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass

import faust
from aiokafka.errors import KafkaError

from stream.engine.tally import Tally
from stream.kafka.admin import partition_counts
from stream.kafka.configuration import client_options
from stream.settings import Settings
from stream.worker.lag import Lag

log = logging.getLogger(__name__)

STALLED_EXIT_CODE = 3


def watch_for_stalls(app: faust.App, tally: Tally, lag: Lag, settings: Settings) -> None:
    """A timer on `app` that exits the process when records wait and none are processed."""
    timeout = settings.stall_timeout
    if timeout <= 0:
        return
    seen = _Progress(entries=-1, since=time.monotonic())

    @app.timer(min(5.0, timeout / 3), name="stall-watchdog")
    async def watchdog() -> None:
        now = time.monotonic()
        if tally.entries_in != seen.entries:
            seen.entries, seen.since = tally.entries_in, now
            if seen.broker_away:
                log.warning("processing again: the broker at %s is back", settings.bootstrap)
                seen.broker_away = False
            return
        await lag.refresh()
        # A partition whose end no fetch reported for so long is not being fetched: stalled.
        behind = sum(1 if records is None else records for records in lag.by_partition().values())
        if behind == 0:
            seen.since = now
            return
        if not await _broker_answers(settings):
            if not seen.broker_away:
                log.warning("%d records behind and none processed: the broker at %s does not "
                            "answer; waiting for it", behind, settings.bootstrap)
            seen.broker_away, seen.since = True, time.monotonic()
            return
        if seen.broker_away:
            log.warning("the broker at %s answers again; nothing processed yet",
                        settings.bootstrap)
            seen.broker_away = False
        if now - seen.since >= timeout:
            log.error("stalled: %d records behind and none processed for %.0fs; exiting "
                      "for a restart", behind, now - seen.since)
            logging.shutdown()
            os._exit(STALLED_EXIT_CODE)


@dataclass
class _Progress:
    entries: int
    since: float  # when the watchdog last saw progress, nothing to do, or no broker
    broker_away: bool = False


async def _broker_answers(settings: Settings) -> bool:
    try:
        await asyncio.wait_for(partition_counts(client_options(settings), []), 15)
    except (KafkaError, OSError, TimeoutError):
        return False
    return True
