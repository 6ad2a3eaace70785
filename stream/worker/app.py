"""The Faust adapter: an app built from Settings, running the engine over batches of events."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass

import faust
from aiokafka.errors import MessageSizeTooLargeError, RecordTooLargeError
from faust.types import EventT, StreamT

from stream.engine import Engine, Limits
from stream.security import client_options, faust_credentials
from stream.settings import MAX_RECORD_BYTES, Settings
from stream.worker import highwaters
from stream.worker.metrics import Readings, WorkerMetrics
from stream.worker.processor import BatchProcessor, InRecord, OutRecord, too_large_notice
from stream.worker.tables import FaustStateStore

log = logging.getLogger(__name__)

_NEVER_FITS = (MessageSizeTooLargeError, RecordTooLargeError)

STALLED_EXIT_CODE = 3
SESSIONS_TABLE = "sessions"
MEMORY_TABLE = "memory"


@dataclass
class Worker:
    app: faust.App
    processor: BatchProcessor
    store: FaustStateStore
    settings: Settings
    metrics: WorkerMetrics


def changelog_topics(settings: Settings) -> list[str]:
    return [f"{settings.app_id}-{name}-changelog" for name in (SESSIONS_TABLE, MEMORY_TABLE)]


def create_app(settings: Settings) -> Worker:
    highwaters.install(client_options(settings))
    app = faust.App(
        settings.app_id,
        broker=settings.broker,
        broker_credentials=faust_credentials(settings),
        store=settings.store,
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
        consumer_max_fetch_size=MAX_RECORD_BYTES,
        stream_buffer_maxsize=max(4096, 4 * settings.batch_size),
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
    store = FaustStateStore(
        app.Table(SESSIONS_TABLE, **table_options), app.Table(MEMORY_TABLE, **table_options)
    )
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
    metrics = WorkerMetrics(Readings(
        processor.tally,
        lambda: dict(processor.outputs_by_topic),
        store.size,
        lambda: {p: lag for p, lag in _lag(app, settings.input_topic, processor.positions).items()
                 if lag is not None},
    ))
    worker = Worker(app, processor, store, settings, metrics)
    app.agent(source, name="clean")(_agent(worker))
    _add_pages(worker)
    _watch_for_stalls(worker)
    return worker


def _agent(worker: Worker):
    settings = worker.settings
    last_sweep = time.monotonic()

    async def clean(stream: StreamT) -> None:
        # Faust acks a batch of take_events even when the loop body raises, so nothing may
        # escape it: the engine dead-letters what it cannot process, and delivery is retried
        # until the broker has every output (resending is harmless: same bytes, same ids).
        nonlocal last_sweep
        async for events in stream.take_events(settings.batch_size, settings.batch_within):
            started = time.monotonic()
            records = _records(events)
            outputs = worker.processor.process(records)
            await _deliver_until_done(worker.app, outputs, settings.dlq_topic)
            owned = _owned(worker.app, settings.input_topic)
            worker.processor.flush(time.time(), owned)
            _observe(worker.metrics, records, started)
            if time.monotonic() - last_sweep >= settings.ttl_sweep_interval:
                last_sweep = time.monotonic()
                expired = worker.processor.expire(time.time(), owned)
                if expired:
                    log.info("forgot %d sessions idle longer than %ss", expired,
                             settings.session_ttl)

    return clean


def _records(events: list[EventT]) -> list[InRecord]:
    return [
        InRecord(m.topic, m.partition, m.offset, m.key, m.value, m.timestamp)
        for m in (event.message for event in events)
    ]


def _owned(app: faust.App, topic: str) -> set[int]:
    return {tp.partition for tp in app.consumer.assignment() if tp.topic == topic}


def _observe(metrics: WorkerMetrics, records: list[InRecord], started: float) -> None:
    metrics.batch_seconds.observe(time.monotonic() - started)
    now = time.time()
    for record in records:
        if record.timestamp:
            metrics.record_latency.observe(max(0.0, now - record.timestamp))


async def _deliver_until_done(app: faust.App, outputs: list[OutRecord], dlq_topic: str) -> None:
    """Send until the broker has every output. A record the broker can never take (too
    large) is replaced by a dead-letter notice; other failures are retried with backoff,
    and resending is harmless: the same bytes with the same ids."""
    pending = outputs
    delay = 0.5
    while pending:
        failed = await _deliver(app, pending)
        pending = [_too_large_notice(out, error, dlq_topic) if isinstance(error, _NEVER_FITS)
                   else out for out, error in failed]
        if pending:
            log.warning("could not deliver %d outputs (%s); retrying in %.1fs", len(pending),
                        type(failed[0][1]).__name__, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)


async def _deliver(app: faust.App, outputs: list[OutRecord]) -> list[tuple[OutRecord, Exception]]:
    """Send every output, in order per partition; the ones that failed, with their errors."""
    producer = app.producer
    sent: list[tuple[OutRecord, object]] = []
    failed: list[tuple[OutRecord, Exception]] = []
    for out in outputs:
        try:
            sent.append((out, await producer.send(out.topic, out.key, out.value, out.partition,
                                                  None, out.headers)))
        except Exception as error:  # noqa: BLE001 - reported to the caller, which decides
            failed.append((out, error))
    results = await asyncio.gather(*(future for _, future in sent), return_exceptions=True)
    failed += [(out, r) for (out, _), r in zip(sent, results, strict=True)
               if isinstance(r, Exception)]
    return failed


def _too_large_notice(out: OutRecord, error: Exception, dlq_topic: str) -> OutRecord:
    log.error("an output of %d bytes for %s is larger than the broker accepts (%s); "
              "sending a dead-letter notice instead", len(out.value), out.topic,
              type(error).__name__)
    return too_large_notice(out, dlq_topic)


def _lag(app: faust.App, topic: str, positions: dict[int, int]) -> dict[int, int | None]:
    """Records behind the newest one the consumer has seen, per assigned input partition,
    counted from what this worker processed or, for a partition it has not processed yet,
    from the group's committed offset; None where no fetch has reported the end yet."""
    lag: dict[int, int | None] = {}
    consumer = app.consumer
    for tp in consumer.assignment():
        if tp.topic != topic:
            continue
        highwater = consumer.highwater(tp)
        committed = consumer._committed_offset.get(tp) or 0  # Faust keeps no public view
        position = max(positions.get(tp.partition, 0), committed)
        lag[tp.partition] = None if highwater is None else max(0, highwater - position)
    return lag


def _watch_for_stalls(worker: Worker) -> None:
    """Faust can stop feeding an agent after a rebalance while its partitions still hold
    records (seen here with a worker rejoining a group). A worker that has work but makes no
    progress for `stall_timeout` exits with code 3 so its supervisor restarts it; processing
    is replay-safe, so the restart loses and doubles nothing."""
    timeout = worker.settings.stall_timeout
    if timeout <= 0:
        return
    processor, app = worker.processor, worker.app
    seen = {"entries": -1, "since": time.monotonic()}

    @app.timer(min(5.0, timeout / 3), name="stall-watchdog")
    async def watchdog() -> None:
        now = time.monotonic()
        if processor.tally.entries_in != seen["entries"]:
            seen.update(entries=processor.tally.entries_in, since=now)
            return
        # A partition whose end no fetch reported for so long is not being fetched: stalled.
        lags = _lag(app, worker.settings.input_topic, processor.positions).values()
        behind = sum(1 if lag is None else lag for lag in lags)
        if behind == 0:
            seen["since"] = now
        elif now - seen["since"] >= timeout:
            log.error("stalled: %d records behind and none processed for %.0fs; exiting "
                      "for a restart", behind, now - seen["since"])
            logging.shutdown()
            os._exit(STALLED_EXIT_CODE)


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
