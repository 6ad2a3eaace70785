"""How a batch leaves the worker: the commit, and the one object that owns it.

A processed batch is committed in three steps, each begun once the one before has finished:
1. its outputs are in the broker (one the broker can never take replaced by a dead letter),
2. then the changelog records of the state those outputs came from,
3. then its input records are acknowledged to Faust, whose commits follow the acks.
And batch N+1's first step begins only once batch N's last has finished.

Why this order: a crash before the changelog lands replays the batch against the old state,
which gives the same outputs again, byte for byte; a crash after it replays against the new
state, which the engine recognises by source offset; so a commit never covers a record whose
outputs or state could still be lost. Batches commit one after another so the changelog holds
each session's states in order, and so no batch is acknowledged while an earlier one could
still fail (its replay would meet the later state and lose its outputs).

The next batch is processed while one is committed (its table writes are already visible,
stream.worker.tables); a rebalance or a stop waits for the batch in delivery, whose records
stay unacknowledged until step 3 (stream.worker.lane).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from aiokafka import AIOKafkaProducer
from faust.types import Message

from stream.engine import DeadLetter
from stream.kafka.producer import deliver_until_done
from stream.worker.metrics import WorkerMetrics
from stream.worker.processor import OutRecord, ProcessedBatch, dead_letter_record
from stream.worker.tables import ChangelogRecord

log = logging.getLogger(__name__)


class Acknowledger(Protocol):
    """What lets the input records go: Faust's consumer, through the lane."""

    def ack_all(self, messages: Sequence[Message]) -> None: ...


class EarlierCommitFailed(Exception):
    """The batch before this one was not committed: this one is neither sent nor acknowledged,
    as its acks would let Faust commit past records whose outputs may be lost."""


class Committer:
    """Commits processed batches, in the order they are given, one after another."""

    def __init__(self, producer: AIOKafkaProducer, acknowledger: Acknowledger,
                 dlq_topic: str, metrics: WorkerMetrics) -> None:
        self._producer = producer
        self._acknowledger = acknowledger
        self._dlq_topic = dlq_topic
        self._metrics = metrics
        self._in_flight: asyncio.Task[None] | None = None  # the last batch given

    async def commit(self, batch: ProcessedBatch, messages: Sequence[Message], *,
                     started: float) -> None:
        """Start committing `batch` (processed from `messages` since `started`) and return once
        the batch given before it is committed: the caller processes the next batch meanwhile.
        Raises what stopped the batch before (a DeliveryFailed, an EarlierCommitFailed)."""
        previous = self._in_flight
        self._in_flight = asyncio.ensure_future(self._commit(previous, batch, messages, started))
        if previous is not None:
            await previous

    async def drain(self) -> None:
        """Wait until every batch given is committed."""
        if self._in_flight is not None:
            await self._in_flight

    async def _commit(self, previous: asyncio.Task[None] | None, batch: ProcessedBatch,
                      messages: Sequence[Message], started: float) -> None:
        if previous is not None:
            try:
                await asyncio.shield(previous)
            except Exception as error:
                raise EarlierCommitFailed(f"the batch before failed: {error!r}") from error
        await deliver_until_done(self._producer, batch.outputs, self._dead_letter_instead)
        await deliver_until_done(self._producer, batch.changelog, _keep_unsaved)
        self._acknowledger.ack_all(messages)
        self._observe(messages, started)

    def _dead_letter_instead(self, out: OutRecord, error: Exception) -> OutRecord:
        log.error("an output of %d bytes for %s is larger than the broker accepts (%s); "
                  "sending a dead-letter notice instead", len(out.value), out.topic,
                  type(error).__name__)
        return too_large_notice(out, self._dlq_topic)

    def _observe(self, messages: Sequence[Message], started: float) -> None:
        """What the batch took, from its processing to its acks."""
        self._metrics.batch_seconds.observe(time.monotonic() - started)
        now = time.time()
        self._metrics.record_latency.observe_many(
            max(0.0, now - message.timestamp) for message in messages if message.timestamp)


def too_large_notice(out: OutRecord, dlq_topic: str) -> OutRecord:
    """A dead letter standing in for an output the broker refuses as too large: where it
    came from and how large it was, without the bytes."""
    reason = f"{len(out.value)}-byte output for {out.topic} is larger than the broker accepts"
    key = out.key.decode("utf-8", "backslashreplace") if out.key is not None else ""
    letter = DeadLetter(key, out.source, reason, b"")
    return dead_letter_record(dlq_topic, out.partition, out.key, letter, out.source,
                              raw_omitted=True)


def _keep_unsaved(record: ChangelogRecord, error: Exception) -> None:
    # Only a hostile entry id of megabytes makes a state value too large for the broker. The
    # table keeps the value; a restart recovers the session without it.
    log.error("the broker refuses a %d-byte changelog value for %s (%s); the session's "
              "state is kept in memory only", len(record.value or b""), record.topic,
              type(error).__name__)
