"""The Faust adapter: an app built from Settings, running the engine over batches of events."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass

import faust
from aiokafka.errors import KafkaError
from faust.types import Message

from stream.engine import Engine, Limits
from stream.formats import state_format_for
from stream.kafka import internals
from stream.kafka.admin import partition_counts
from stream.kafka.configuration import MAX_RECORD_BYTES, client_options, faust_credentials
from stream.kafka.producer import make_producer
from stream.settings import Settings
from stream.worker.checkpoint import Checkpoint
from stream.worker.codec import STATE_FORMAT
from stream.worker.lane import LaneApp, LaneConsumer
from stream.worker.metrics import Readings, WorkerMetrics
from stream.worker.processor import BatchProcessor
from stream.worker.tables import TableStore

log = logging.getLogger(__name__)

STALLED_EXIT_CODE = 3
# What one fetch takes of a partition: a larger record still comes whole (brokers return the
# first batch even when it exceeds this), and fetches of this size keep records arriving
# while a batch is processed instead of in a few huge responses.
FETCH_BYTES_PER_PARTITION = 1024 * 1024
SESSIONS_TABLE = "sessions"
MEMORY_TABLE = "memory"


@dataclass
class Worker:
    app: faust.App
    processor: BatchProcessor
    store: TableStore
    settings: Settings
    metrics: WorkerMetrics
    # per input partition, the consumer's fetch position as last read (see _fetch_positions)
    fetched: dict[int, int]


def changelog_topics(settings: Settings) -> list[str]:
    return [f"{settings.app_id}-{name}-changelog" for name in (SESSIONS_TABLE, MEMORY_TABLE)]


def create_app(settings: Settings) -> Worker:
    app = LaneApp(
        settings.app_id,
        make_producer=lambda: make_producer(settings),
        broker=settings.broker,
        broker_credentials=faust_credentials(settings),
        store="memory://",
        datadir=settings.data_dir,
        autodiscover=False,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication,
        topic_allow_declare=True,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=settings.session_timeout,
        broker_heartbeat_interval=min(1.0, settings.session_timeout / 5),
        producer_linger=0.01,
        producer_max_batch_size=1024 * 1024,
        producer_max_request_size=MAX_RECORD_BYTES,
        consumer_max_fetch_size=FETCH_BYTES_PER_PARTITION,
        broker_max_poll_records=settings.batch_size,
        web_enabled=True,
        web_host=settings.web_host,
        web_port=settings.web_port,
        # Tables hold transcript hashes and ids: none of Faust's browsing pages are served.
        web_tables_enabled=False,
        web_router_enabled=False,
        web_graph_enabled=False,
        web_stats_enabled=False,
    )
    # bytes in and out: the "raw" codec, so Faust spends nothing on (de)serialization.
    table_options = {"key_type": bytes, "value_type": bytes, "partitions": settings.partitions}
    sessions = app.Table(SESSIONS_TABLE, **table_options)
    memory = app.Table(MEMORY_TABLE, **table_options)
    app.restore_in_batches(sessions)
    app.restore_in_batches(memory)
    store = TableStore(internals.table_dict(sessions), internals.table_dict(memory),
                       sessions.changelog_topic_name, memory.changelog_topic_name,
                       state_format_for(settings.upgrade_from) or STATE_FORMAT)
    processor = BatchProcessor(
        Engine(Limits(max_ids=settings.max_ids, snippet_chars=settings.alert_snippet_chars)),
        store,
        settings,
    )
    source = app.topic(
        settings.input_topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        partitions=settings.partitions,
    )
    fetched: dict[int, int] = {}
    metrics = WorkerMetrics(Readings(
        processor.tally,
        lambda: dict(processor.outputs_by_topic),
        store.size,
        lambda: {p: lag for p, lag in _lag(app, settings.input_topic, processor.positions,
                                           fetched).items()
                 if lag is not None},
    ))
    worker = Worker(app, processor, store, settings, metrics, fetched)
    app.lane(source, _batch_handler(worker))
    _add_pages(worker)
    _watch_for_stalls(worker)
    return worker


def _batch_handler(worker: Worker):
    """The lane's handler. A batch is processed and its state written to the tables at once;
    its checkpoint (stream.worker.checkpoint) commits it while the next batch is fetched and
    processed, after the checkpoint of the batch before."""
    settings = worker.settings
    last_sweep = time.monotonic()
    committing: asyncio.Future | None = None

    async def clean(messages: list[Message]) -> None:
        # Runs inside Faust's fetcher: nothing may escape it. The engine dead-letters what it
        # cannot process, and delivery is retried until the broker has every record.
        nonlocal last_sweep, committing
        started = time.monotonic()
        sweep = started - last_sweep >= settings.ttl_sweep_interval
        if sweep:
            last_sweep = started
        batch = worker.processor.process(messages, time.time(),
                                         _owned(worker.app, settings.input_topic), sweep)
        if batch.forgotten:
            log.info("forgot %d sessions idle longer than %ss", batch.forgotten,
                     settings.session_ttl)
        previous = committing
        checkpoint = Checkpoint(batch, messages, started=started, previous=previous)
        committing = asyncio.ensure_future(checkpoint.commit(
            worker.app.batch_producer, _consumer(worker.app), settings.dlq_topic,
            worker.metrics))
        if previous is not None:
            await previous

    return clean


def _consumer(app: faust.App) -> LaneConsumer:
    return app.consumer  # type: ignore[return-value]


def _owned(app: faust.App, topic: str) -> set[int]:
    return {tp.partition for tp in app.consumer.assignment() if tp.topic == topic}


def _lag(app: faust.App, topic: str, positions: dict[int, int],
         fetched: dict[int, int]) -> dict[int, int | None]:
    """Records behind the newest one the consumer has seen, per assigned input partition,
    counted from what this worker processed or, for a partition it has not processed yet,
    from the group's committed offset; None where no fetch has reported the end yet.

    Offsets that hold no record (the commit marker after a transaction's records, a record
    compaction removed) are never processed: the consumer's fetch position passes them, and
    counting from it keeps a partition that ends in a marker from looking one record behind
    forever (which made the stall watchdog restart an idle worker on a transactional input).
    """
    lag: dict[int, int | None] = {}
    consumer = app.consumer
    for tp in consumer.assignment():
        if tp.topic != topic:
            continue
        highwater = consumer.highwater(tp)
        committed = internals.committed_offset(consumer, tp) or 0
        position = max(positions.get(tp.partition, 0), committed, fetched.get(tp.partition, 0))
        lag[tp.partition] = None if highwater is None else max(0, highwater - position)
    return lag


async def _fetch_positions(app: faust.App, topic: str, fetched: dict[int, int]) -> None:
    """Read the consumer's fetch position of each assigned input partition into `fetched`.

    The position is past every record the consumer handed on, and past the offsets without a
    record it read over; a record handed on is in the lane's batch at once, so between it and
    what was processed lies nothing but such offsets (or, for a moment, a fetch on its way).
    """
    consumer = app.consumer
    owned = [tp for tp in consumer.assignment() if tp.topic == topic]
    # A partition without a position yet (a rebalance under way) is left for the next tick.
    found = await asyncio.gather(*(asyncio.wait_for(consumer.position(tp), 2.0) for tp in owned),
                                 return_exceptions=True)
    fetched.clear()
    fetched.update({tp.partition: position for tp, position in zip(owned, found, strict=True)
                    if isinstance(position, int)})


def _watch_for_stalls(worker: Worker) -> None:
    """Faust can stop feeding an agent after a rebalance while its partitions still hold
    records (seen here with a worker rejoining a group). A worker that has work but makes no
    progress for `stall_timeout` exits with code 3 so its supervisor restarts it; processing
    is replay-safe, so the restart loses and doubles nothing.

    A broker that does not answer is no stall (stream.kafka.retry): Faust's consumer and the
    deliveries wait for it, and a restart would only wait too (or give up at start-up). The
    stall clock starts again when the broker answers."""
    timeout = worker.settings.stall_timeout
    settings = worker.settings
    processor, app, topic = worker.processor, worker.app, settings.input_topic
    seen = _Progress(entries=-1, since=time.monotonic())

    @app.timer(min(5.0, timeout / 3) if timeout > 0 else 5.0, name="stall-watchdog")
    async def watchdog() -> None:
        # also what /metrics counts lag from
        await _fetch_positions(app, topic, worker.fetched)
        if timeout <= 0:
            return
        now = time.monotonic()
        if processor.tally.entries_in != seen.entries:
            seen.entries, seen.since = processor.tally.entries_in, now
            if seen.broker_away:
                log.warning("processing again: the broker at %s is back", settings.bootstrap)
                seen.broker_away = False
            return
        # A partition whose end no fetch reported for so long is not being fetched: stalled.
        lags = _lag(app, topic, processor.positions, worker.fetched).values()
        behind = sum(1 if lag is None else lag for lag in lags)
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


def _add_pages(worker: Worker) -> None:
    app, processor, store, metrics = worker.app, worker.processor, worker.store, worker.metrics

    @app.page("/stats")
    async def stats(web, request):
        sessions, memory = store.size()
        assigned = sorted(tp.partition for tp in app.consumer.assignment()
                          if tp.topic == worker.settings.input_topic)
        body = {
            **processor.tally.as_json(),
            "table_keys": {"sessions": sessions, "memory": memory},
            "assigned_partitions": assigned,
        }
        return web.json(body)

    @app.page("/metrics")
    async def prometheus(web, request):
        return web.bytes(metrics.text(), content_type="text/plain; version=0.0.4")
