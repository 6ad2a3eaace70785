"""How one batch leaves the worker: the commit protocol, in one method.

A batch's records are acknowledged to Faust (whose commits follow the acks) only after its
outputs and then its changelog records are in the broker, and after every earlier batch's:
a crash before the changelog lands replays the batch against the old state, which gives the
same outputs again, byte for byte; a crash after it replays against the new state, which the
engine recognises by source offset; a commit never covers a record whose outputs or state
could still be lost. The next batch is processed meanwhile; a rebalance or a stop waits for
the batch in delivery (its records stay unacked until then) before partitions move.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Protocol

import orjson
from aiokafka import AIOKafkaProducer
from faust.types import Message

from stream.engine import DeadLetter
from stream.kafka.producer import deliver_until_done
from stream.worker.metrics import WorkerMetrics
from stream.worker.processor import OutRecord, ProcessedBatch, source_header
from stream.worker.tables import ChangelogRecord

log = logging.getLogger(__name__)


class Acknowledger(Protocol):
    def ack_all(self, messages: Sequence[Message]) -> None: ...


class Checkpoint:
    """One processed batch on its way out; `commit` sends it and lets its inputs go."""

    def __init__(self, batch: ProcessedBatch, messages: list[Message], *, started: float,
                 previous: asyncio.Future | None) -> None:
        self.batch = batch
        self.messages = messages
        self.started = started  # when the batch's processing began, for the metrics
        self.previous = previous  # the commit of the batch before this one

    async def commit(self, producer: AIOKafkaProducer, consumer: Acknowledger,
                     dlq_topic: str, metrics: WorkerMetrics) -> None:
        # 1. After every earlier batch, so the changelog holds each session's states in order.
        if self.previous is not None:
            await self.previous
        # 2. The outputs; one the broker can never take is replaced by a dead-letter notice.
        await deliver_until_done(producer, self.batch.outputs, _notice_instead(dlq_topic))
        # 3. The changelog of the state those outputs came from.
        await deliver_until_done(producer, self.batch.changelog, _keep_unsaved)
        # 4. Only now may Faust commit the input records.
        consumer.ack_all(self.messages)
        # 5. What the batch took, from its processing to its acks.
        metrics.batch_seconds.observe(time.monotonic() - self.started)
        now = time.time()
        metrics.record_latency.observe_many(
            max(0.0, now - message.timestamp) for message in self.messages if message.timestamp)


def too_large_notice(out: OutRecord, dlq_topic: str) -> OutRecord:
    """A dead letter standing in for an output the broker refuses as too large: where it
    came from and how large it was, without the bytes."""
    reason = f"{len(out.value)}-byte output for {out.topic} is larger than the broker accepts"
    key = out.key.decode("utf-8", "backslashreplace") if out.key is not None else ""
    letter = DeadLetter(key, out.source, reason, b"")
    body = {**letter.as_json(), "raw_encoding": "omitted"}
    return OutRecord(dlq_topic, out.partition, out.key, orjson.dumps(body), out.source,
                     headers=[("reason", reason.encode()), ("source", source_header(out.source))])


def _notice_instead(dlq_topic: str):
    def notice(out: OutRecord, error: Exception) -> OutRecord:
        log.error("an output of %d bytes for %s is larger than the broker accepts (%s); "
                  "sending a dead-letter notice instead", len(out.value), out.topic,
                  type(error).__name__)
        return too_large_notice(out, dlq_topic)

    return notice


def _keep_unsaved(record: ChangelogRecord, error: Exception) -> None:
    # Only a hostile entry id of megabytes makes a state value too large for the broker. The
    # table keeps the value; a restart recovers the session without it.
    log.error("the broker refuses a %d-byte changelog value for %s (%s); the session's "
              "state is kept in memory only", len(record.value or b""), record.topic,
              type(error).__name__)
