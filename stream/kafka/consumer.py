"""The consumers of the project's own tools (tail, the memory writer, dev): how they are made,
how they wait for a topic, and when they have read it to its end (where a topic ends:
`stream.kafka.ends`).

They read committed records only: what a worker's transaction aborted (exactly once,
stream.worker.exactly_once) is never read, and what it has not committed yet is read once it
is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from stream.kafka import internals
from stream.kafka.configuration import REQUEST_TIMEOUT_MS, client_options
from stream.kafka.retry import Backoff, curable
from stream.settings import Settings

# Apache Kafka lists a topic only once its leaders are elected, a moment after creation.
METADATA_GRACE = 3.0


class TopicMissing(LookupError):
    """The topic to read does not exist (yet)."""


def cannot_read(settings: Settings, topic: str, error: Exception) -> str:
    """The one line a tool prints when its topic or the broker is not there."""
    return (f"session-stream: cannot read {topic} from the Kafka broker at "
            f"{settings.bootstrap}: {error}")


def make_consumer(settings: Settings, group: str | None = None, **options: Any) -> AIOKafkaConsumer:
    """A consumer that commits only when told to; in `group`, with the settings' session
    timeout, else assigning partitions itself (taking none from the worker's group)."""
    if group is not None:
        options.setdefault("session_timeout_ms", int(settings.session_timeout * 1000))
        options.setdefault("heartbeat_interval_ms",
                           int(min(1.0, settings.session_timeout / 5) * 1000))
    return AIOKafkaConsumer(
        **client_options(settings),
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        **options,
    )


async def topic_partitions(consumer: AIOKafkaConsumer, topics: list[str], *, wait: bool,
                           grace: float = METADATA_GRACE) -> list[TopicPartition]:
    """Every partition of `topics`. With `wait`, until they all exist; else a topic still
    missing after `grace` seconds raises TopicMissing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while True:
        await internals.refresh_metadata(consumer)
        found = {topic: consumer.partitions_for_topic(topic) for topic in topics}
        missing = [topic for topic, numbers in found.items() if not numbers]
        if not missing:
            return [TopicPartition(t, n) for t in topics for n in sorted(found[t] or ())]
        if not wait and loop.time() >= deadline:
            raise TopicMissing(f"topic {missing[0]!r} does not exist")
        await asyncio.sleep(0.5)


async def caught_up(consumer: AIOKafkaConsumer, partitions: Iterable[TopicPartition]) -> bool:
    """Every partition is read up to what its latest fetch said a committed reader can read:
    the last stable offset, short of an open transaction's first record, else the high
    watermark (False while a partition has not been fetched yet)."""
    for partition in partitions:
        end = consumer.last_stable_offset(partition)
        if end is None:
            end = consumer.highwater(partition)
        if end is None or await consumer.position(partition) < end:
            return False
    return True


async def fetch(consumer: AIOKafkaConsumer, timeout_ms: int, backoff: Backoff, broker: str,
                log: logging.Logger) -> dict[TopicPartition, list[ConsumerRecord]] | None:
    """The records of one fetch; None once the broker's absence failed it and the next delay
    of `backoff` was waited out. A failed fetch takes nothing: its records come again."""
    try:
        batches = await consumer.getmany(timeout_ms=timeout_ms)
    except KafkaError as error:
        if not curable(error):
            raise
        delay = backoff.next()
        log.warning("fetching from %s failed (%s); retrying in %.1fs", broker, error, delay)
        await asyncio.sleep(delay)
        return None
    backoff.reset()
    return batches
