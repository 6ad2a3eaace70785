"""`session-stream worker`: wait for the broker, create the topics, run the Faust worker."""

from __future__ import annotations

import gc
import logging
import math
import sys

import faust

from stream.kafka import internals
from stream.kafka.admin import BrokerUnreachable, TopicMismatch, ensure_topics, wait_for_broker
from stream.kafka.configuration import client_options
from stream.kafka.retry import quiet_client_logs
from stream.settings import Settings
from stream.worker.app import changelog_topics, create_app
from stream.worker.guarantee import GuaranteeRefused, exactly_once


def run_worker(settings: Settings) -> int:
    logging.basicConfig(level=settings.log_level.upper(),
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    try:
        wait_for_broker(client_options(settings), settings.startup_deadline or math.inf,
                        name=settings.broker)
        ensure_topics(settings, changelog_topics(settings))
        transactions = exactly_once(settings)
    except (BrokerUnreachable, TopicMismatch, GuaranteeRefused) as error:
        print(f"session-stream worker: {error}", file=sys.stderr)
        return 1
    internals.install_worker_patches(client_options(settings))
    quiet_client_logs()
    worker = create_app(settings, exactly_once=transactions)
    runner = faust.Worker(worker.app, loglevel=settings.log_level, quiet=True)
    # With a spinner Faust sets the root logger to DEBUG, and every debug call of Faust and
    # aiokafka then builds a record, whatever --log-level says.
    runner.spinner = None
    _tune_gc()
    runner.execute_from_commandline()
    return 0


def _tune_gc() -> None:
    """Each entry allocates dozens of containers (its parsed JSON, records, verdicts) that
    refcounting frees; the default threshold ran a cycle collection every 700 of them, which
    find nothing to collect. Start-up objects live for the whole run: frozen out of it."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
