"""Which processing guarantee the worker runs with, decided once at its start.

`--processing-guarantee` takes Kafka Streams' names. `at_least_once` is that; `exactly_once_v2`
and `auto` ask the broker for a transactional producer first (stream.kafka.transactional):
where it grants one (Apache Kafka) the worker runs exactly once; where it does not (Tansu
refuses aiokafka's InitProducerId), `auto` runs at least once and says so in one line naming
the reason, and `exactly_once_v2` refuses to start.
"""

from __future__ import annotations

import logging

from stream.kafka.admin import run_sync
from stream.kafka.transactional import transactions_refused
from stream.settings import Settings

log = logging.getLogger(__name__)

class GuaranteeRefused(RuntimeError):
    """exactly_once_v2 was asked for and the broker grants no transactional producer."""


def exactly_once(settings: Settings) -> bool:
    """Whether the worker runs exactly once; raises GuaranteeRefused."""
    asked = settings.processing_guarantee
    if asked == "at_least_once":
        log.info("processing guarantee: at least once (--processing-guarantee at_least_once)")
        return False
    refused = run_sync(lambda: transactions_refused(settings))
    if refused is None:
        log.info("processing guarantee: exactly once (the broker at %s grants transactional "
                 "producers)", settings.bootstrap)
        return True
    if asked == "exactly_once_v2":
        raise GuaranteeRefused(
            f"--processing-guarantee exactly_once_v2, but the broker at {settings.bootstrap} "
            f"grants no transactional producer: {refused}")
    log.warning("processing guarantee: at least once, not exactly once: the broker at %s grants "
                "no transactional producer (%s)", settings.bootstrap, refused)
    return False
