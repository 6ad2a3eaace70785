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
from stream.kafka.retry import Backoff
from stream.settings import Settings

log = logging.getLogger(__name__)

_METADATA_ROUNDS = 20
# A metadata request is small: an answer slower than this is no answer.
PROBE_TIMEOUT_MS = 5000
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


def wait_for_broker(options: Mapping[str, Any], deadline_s: float, *, name: str = "",
                    backoff: Backoff | None = None,
                    worth_asking: Callable[[], bool] = lambda: True,
                    quiet: bool = False) -> None:
    """Ask the broker at `options` for metadata until it answers (`answers_metadata`), with
    `backoff` between tries (0.25 s doubling to 5 s) and a warning for each unless `quiet`;
    raise BrokerUnreachable once `deadline_s` would pass. `name` is the broker as the user
    gave it. `worth_asking` comes before each try: a launcher's check that its process runs
    (it raises to give up) and listens (False: no request yet, so the client logs nothing).
    """
    name = name or str(options["bootstrap_servers"])
    backoff = backoff or Backoff(0.25, 5.0)
    stop_at = time.monotonic() + deadline_s
    while True:
        problem = "not listening yet"
        try:
            if worth_asking():
                if run_sync(lambda: answers_metadata(options)):
                    return
                problem = "no broker in its metadata"
        except (KafkaError, OSError) as error:
            problem = type(error).__name__
        delay = backoff.next()
        if time.monotonic() + delay > stop_at:
            raise BrokerUnreachable(
                f"no Kafka broker answered at {name} within {deadline_s:g}s ({problem})")
        if not quiet:
            log.warning("broker %s not reachable yet (%s); retrying in %.1fs", name, problem,
                        delay)
        time.sleep(delay)


async def partition_counts(options: Mapping[str, Any], topics: list[str]) -> dict[str, int]:
    """Partition counts as the cluster reports them; a topic created a moment ago may take a
    few metadata rounds to appear (Apache Kafka propagates it asynchronously)."""
    client = AIOKafkaClient(**options, request_timeout_ms=PROBE_TIMEOUT_MS)
    try:
        await asyncio.wait_for(client.bootstrap(), PROBE_TIMEOUT_MS / 1000 * 2)
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


async def answers_metadata(options: Mapping[str, Any]) -> bool:
    """The broker answers a metadata request and lists at least one broker; raises the
    client's error (a KafkaError, an OSError) when it cannot connect."""
    client = AIOKafkaClient(**options, request_timeout_ms=PROBE_TIMEOUT_MS)
    try:
        await asyncio.wait_for(client.bootstrap(), PROBE_TIMEOUT_MS / 1000 * 2)
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
