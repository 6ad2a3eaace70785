"""Create the worker's topics before Faust starts, and refuse to run on mismatched ones.

Faust crash-loops with PartitionsMismatch when a topic exists with another partition
count, so the input, the outputs and the changelogs are created here, co-partitioned,
and checked.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiokafka import AIOKafkaClient
from aiokafka.errors import KafkaError

from stream.brokers.local import create_topics, run_sync
from stream.kafka.configuration import client_options
from stream.settings import TOPIC_CONFIG, Settings

log = logging.getLogger(__name__)

COMPACTED = {**TOPIC_CONFIG, "cleanup.policy": "compact"}
_METADATA_ROUNDS = 20


class TopicMismatch(RuntimeError):
    """An existing topic has another partition count than the worker is configured for."""


class BrokerUnreachable(RuntimeError):
    """No broker answered within the start-up deadline."""


def wait_for_broker(settings: Settings, deadline_s: float) -> None:
    """Retry with backoff until the broker answers metadata, or give up with a clear error."""
    stop_at = time.monotonic() + deadline_s
    delay = 0.25
    while True:
        try:
            run_sync(lambda: _partition_counts(client_options(settings), []))
            return
        except (KafkaError, OSError) as error:
            if time.monotonic() + delay > stop_at:
                raise BrokerUnreachable(
                    f"no Kafka broker answered at {settings.broker} within {deadline_s:g}s "
                    f"({type(error).__name__})"
                ) from None
            log.warning("broker %s not reachable yet (%s); retrying in %.1fs",
                        settings.broker, type(error).__name__, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def ensure_topics(settings: Settings, changelogs: list[str]) -> None:
    plain = [settings.input_topic, *settings.output_topics]
    options = client_options(settings)
    create_topics(settings.bootstrap, dict.fromkeys(plain, settings.partitions),
                  config=TOPIC_CONFIG, replication_factor=settings.replication,
                  client_options=options)
    create_topics(settings.bootstrap, dict.fromkeys(changelogs, settings.partitions),
                  config=COMPACTED, replication_factor=settings.replication,
                  client_options=options)
    counts = run_sync(lambda: _partition_counts(options, plain + changelogs))
    wrong = {topic: n for topic, n in counts.items() if n != settings.partitions}
    if wrong:
        raise TopicMismatch(
            f"topics exist with other partition counts than {settings.partitions}: {wrong}; "
            "use --partitions to match them or recreate the topics"
        )


async def _partition_counts(options: dict, topics: list[str]) -> dict[str, int]:
    """Partition counts as the cluster reports them; a topic created a moment ago may take a
    few metadata rounds to appear (Apache Kafka propagates it asynchronously)."""
    client = AIOKafkaClient(**options, request_timeout_ms=5000)
    try:
        await asyncio.wait_for(client.bootstrap(), 10)
        counts: dict[str, int] = {}
        for _ in range(_METADATA_ROUNDS):
            metadata = await client.fetch_all_metadata()
            counts = {t: len(metadata.partitions_for_topic(t) or ()) for t in topics}
            if all(counts.values()):
                break
            await asyncio.sleep(0.5)
        return counts
    finally:
        await client.close()
