"""The Faust adapter, assembled: an app built from Settings, with its tables, its batch lane
(stream.worker.batches), the commit (stream.worker.commit) with its delivery at least once or
exactly once (stream.worker.exactly_once, stream.worker.fencing), lag (stream.worker.lag),
the stall watch (stream.worker.stalls) and the web pages (stream.worker.pages)."""

from __future__ import annotations

from dataclasses import dataclass

from stream.engine import Engine
from stream.formats import state_format_for
from stream.kafka import internals
from stream.kafka.configuration import MAX_RECORD_BYTES, faust_credentials
from stream.kafka.producer import make_producer
from stream.settings import Settings
from stream.worker.batches import batch_handler
from stream.worker.codec import STATE_FORMAT
from stream.worker.commit import Acknowledger, AtLeastOnce, Committer, Delivery
from stream.worker.exactly_once import ExactlyOnce
from stream.worker.fencing import give_up
from stream.worker.lag import Lag
from stream.worker.lane import LaneApp
from stream.worker.metrics import Readings, WorkerMetrics
from stream.worker.pages import add_pages
from stream.worker.processor import BatchProcessor
from stream.worker.stalls import watch_for_stalls
from stream.worker.tables import TableStore

# What one fetch takes of a partition: a larger record still comes whole (brokers return the
# first batch even when it exceeds this), and fetches of this size keep records arriving
# while a batch is processed instead of in a few huge responses.
FETCH_BYTES_PER_PARTITION = 1024 * 1024
# Exactly once, a batch commits a transaction per input partition, whose coordinator round trips
# and commit markers cost the same for 800 entries as for 3,000: fetches four times larger
# (docs/performance.md has the runs with each size).
FETCH_BYTES_PER_PARTITION_EXACTLY_ONCE = 4 * 1024 * 1024
SESSIONS_TABLE = "sessions"
MEMORY_TABLE = "memory"


@dataclass
class Worker:
    app: LaneApp
    processor: BatchProcessor
    store: TableStore
    settings: Settings
    metrics: WorkerMetrics
    lag: Lag


def changelog_topics(settings: Settings) -> list[str]:
    return [f"{settings.app_id}-{name}-changelog" for name in (SESSIONS_TABLE, MEMORY_TABLE)]


def create_app(settings: Settings, *, exactly_once: bool = False) -> Worker:
    """The worker; `exactly_once` where the broker grants transactional producers and the
    settings ask for it (stream.worker.guarantee)."""
    delivery: Delivery = ExactlyOnce(settings) if exactly_once else AtLeastOnce(
        lambda: make_producer(settings), settings.dlq_topic)

    def make_committer(acknowledger: Acknowledger) -> Committer:
        # at the app's start, when everything below exists
        return Committer(delivery, acknowledger, metrics, give_up=lambda partitions: give_up(
            app, store, changelog_topics(settings), partitions))

    app = LaneApp(
        settings.app_id,
        delivery=delivery,
        make_committer=make_committer,
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
        consumer_max_fetch_size=FETCH_BYTES_PER_PARTITION_EXACTLY_ONCE if exactly_once
        else FETCH_BYTES_PER_PARTITION,
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
    state_format = state_format_for(settings.upgrade_from) or STATE_FORMAT
    store = TableStore(internals.table_dict(sessions), internals.table_dict(memory),
                       sessions.changelog_topic_name, memory.changelog_topic_name, state_format)
    processor = BatchProcessor(
        Engine(settings.limits(state_format=state_format)),
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
    lag = Lag(app, settings.input_topic, processor.positions)
    metrics = WorkerMetrics(Readings(
        processor.tally, lambda: dict(processor.outputs_by_topic), store.size, lag.known))
    app.lane(source, batch_handler(app, processor, settings))
    add_pages(app, topic=settings.input_topic, tally=processor.tally, store=store, lag=lag,
              metrics=metrics)
    watch_for_stalls(app, processor.tally, lag, settings)
    return Worker(app, processor, store, settings, metrics, lag)
