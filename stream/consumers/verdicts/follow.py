"""Keeps the verdict index current from the clean and alert topics.

One consumer in no group reads every partition of both topics, so one process answers for
every session whatever the number of workers. It keeps no offsets of its own: at each start it
reads both topics from their oldest records, which rebuilds the index (the topics' retention
and the session TTL bound what that reads), and it is `ready` once it has read up to where
the topics ended when it started. Until then the engine is told the verdicts are rebuilding.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import ConsumerRecord, TopicPartition

from stream.consumers.verdicts.index import VerdictIndex
from stream.consumers.verdicts.records import read_alert, read_clean
from stream.kafka.configuration import client_options
from stream.kafka.consumer import fetch, make_consumer, topic_partitions
from stream.kafka.ends import log_end_offsets
from stream.kafka.retry import Backoff
from stream.settings import Settings

# A fetch returns as soon as records are there, or after this long: the longest a verdict
# waits in the broker once the worker wrote it, small beside the worker's own pipeline
# (docs/performance.md, "The context engine").
FETCH_WAIT_MS = 20
POLL_MS = 200

log = logging.getLogger(__name__)


@dataclass
class Progress:
    records: int = 0
    unreadable: int = 0
    forgotten: int = 0


async def follow(settings: Settings, index: VerdictIndex, ready: asyncio.Event,
                 clock: Callable[[], float] = time.time) -> None:
    """Read both topics into `index` until cancelled; set `ready` once caught up."""
    consumer = make_consumer(settings, None, fetch_max_wait_ms=FETCH_WAIT_MS,
                             auto_offset_reset="earliest")
    progress = Progress()
    await consumer.start()
    try:
        topics = [settings.clean_topic, settings.alerts_topic]
        partitions = await topic_partitions(consumer, topics, wait=True)
        ends = await log_end_offsets(client_options(settings), partitions)
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        backoff = Backoff()
        swept = clock()
        while True:
            batches = await fetch(consumer, POLL_MS, backoff, settings.bootstrap, log)
            if batches is None:
                continue
            apply(settings, index, batches, progress)
            if not ready.is_set() and await _reached(consumer, ends):
                ready.set()
                log.info("verdicts ready: %d sessions from %d records of %s and %s",
                         len(index), progress.records, *topics)
            now = clock()
            if now - swept >= settings.ttl_sweep_interval:
                swept = now
                progress.forgotten += index.forget_idle(now)
    finally:
        await consumer.stop()


def apply(settings: Settings, index: VerdictIndex,
          batches: dict[TopicPartition, list[ConsumerRecord]], progress: Progress) -> None:
    """One fetch into the index, the alerts first: a copy's alert and the clean record of a
    later entry come from one batch of the worker, and the later entry marks the transcript
    processed up to it, which must not happen before the copy is known."""
    ordered = sorted(batches.items(), key=lambda item: item[0].topic != settings.alerts_topic)
    for partition, records in ordered:
        alerts = partition.topic == settings.alerts_topic
        for record in records:
            at = record.timestamp / 1000
            read = (read_alert(index, record.value, at) if alerts
                    else read_clean(index, record.key, record.value, at))
            progress.records += 1
            progress.unreadable += not read


async def _reached(consumer, ends: dict[TopicPartition, int]) -> bool:
    for partition, end in ends.items():
        if await consumer.position(partition) < end:
            return False
    return True
