"""Topics and cluster metadata: create the project's topics, wait for a broker, check counts.

Faust crash-loops with PartitionsMismatch when a topic exists with another partition count,
and a topic auto-created by a first publish gets the broker's default count, so every
command creates the topics it needs before it uses them, co-partitioned, and checks them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from aiokafka import AIOKafkaClient
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code

from stream.kafka.configuration import COMPACTED_TOPIC_CONFIG, TOPIC_CONFIG, client_options
from stream.settings import Settings

log = logging.getLogger(__name__)

_METADATA_ROUNDS = 20
_T = TypeVar("_T")


class TopicMismatch(RuntimeError):
    """An existing topic has another partition count than the worker is configured for."""


class BrokerUnreachable(RuntimeError):
    """No broker answered within the start-up deadline."""


def run_sync(make_coro: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to completion from sync code, even inside a running event loop.

    Inside a loop (e.g. an async test calling a start-up helper) asyncio.run is not
    allowed, so the coroutine gets its own loop in a worker thread; the calling loop
    is blocked meanwhile, which start-up helpers can afford.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coro())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make_coro())).result()


def create_topics(
    bootstrap: str,
    names: Mapping[str, int] | Iterable[str],
    *,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    replication_factor: int = 1,
    client_options: Mapping[str, Any] | None = None,
) -> None:
    """Create topics, ignoring those that already exist.

    `client_options` are aiokafka client arguments (TLS, SASL); by default plain `bootstrap`.
    `names` maps topic to partition count, or lists topics that all get `partitions`.
    An empty or missing `config` becomes TOPIC_CONFIG (Tansu reports DescribeConfigs as
    empty for a topic created without one, which breaks clients that look up retention.ms).
    """
    counts = dict(names) if isinstance(names, Mapping) else dict.fromkeys(names, partitions)
    topic_config = dict(config or TOPIC_CONFIG)
    new_topics = [
        NewTopic(name, count, replication_factor, topic_configs=topic_config)
        for name, count in counts.items()
    ]
    if new_topics:
        run_sync(lambda: _create_topics(bootstrap, new_topics, client_options))


def ensure_input_topic(settings: Settings) -> None:
    """Published before any worker ran, the topic would be auto-created with the broker's
    default partition count, which the worker's co-partitioned topics may not match."""
    create_topics(
        settings.bootstrap,
        {settings.input_topic: settings.partitions},
        config=TOPIC_CONFIG,
        replication_factor=settings.replication,
        client_options=client_options(settings),
    )


def ensure_topics(settings: Settings, changelogs: list[str]) -> None:
    """The worker's input, outputs and compacted changelogs, all with its partition count."""
    plain = [settings.input_topic, *settings.output_topics]
    options = client_options(settings)
    create_topics(settings.bootstrap, dict.fromkeys(plain, settings.partitions),
                  config=TOPIC_CONFIG, replication_factor=settings.replication,
                  client_options=options)
    create_topics(settings.bootstrap, dict.fromkeys(changelogs, settings.partitions),
                  config=COMPACTED_TOPIC_CONFIG, replication_factor=settings.replication,
                  client_options=options)
    counts = run_sync(lambda: partition_counts(options, plain + changelogs))
    wrong = {topic: n for topic, n in counts.items() if n != settings.partitions}
    if wrong:
        raise TopicMismatch(
            f"topics exist with other partition counts than {settings.partitions}: {wrong}; "
            "use --partitions to match them or recreate the topics"
        )


def wait_for_broker(settings: Settings, deadline_s: float) -> None:
    """Retry with backoff until the broker answers metadata, or give up with a clear error."""
    stop_at = time.monotonic() + deadline_s
    delay = 0.25
    while True:
        try:
            run_sync(lambda: partition_counts(client_options(settings), []))
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


async def partition_counts(options: Mapping[str, Any], topics: list[str]) -> dict[str, int]:
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


async def answers_metadata(bootstrap: str) -> bool:
    """A broker at `bootstrap` answers a metadata request and lists at least one broker."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        await client.bootstrap()
        return bool(client.cluster.brokers())
    finally:
        await client.close()


async def _create_topics(
    bootstrap: str, new_topics: list[NewTopic], options: Mapping[str, Any] | None
) -> None:
    admin = AIOKafkaAdminClient(
        **(options or {"bootstrap_servers": bootstrap}), request_timeout_ms=30000
    )
    await admin.start()
    try:
        response = await admin.create_topics(new_topics)
    finally:
        await admin.close()
    # Errors come back per topic rather than raised (Tansu and Kafka alike).
    for topic, code, *_ in response.topic_errors:
        if code and code != TopicAlreadyExistsError.errno:
            raise for_code(code)(f"creating topic {topic!r}")
