"""How a batch leaves the worker: the commit, and the one object that owns its order.

A processed batch is committed in two steps, the second begun once the first has finished:
1. its outputs and the changelog records of the state they came from are delivered (a
   `Delivery`): at least once, the outputs, then the changelog, each until the broker has it
   (`AtLeastOnce`); or exactly once, both in one transaction per input partition together
   with the partition's input offset, which commits all of them or none
   (stream.worker.exactly_once);
2. then its input records are acknowledged to Faust, whose own commits follow the acks where
   the delivery is at least once, and are kept out where the transactions commit the offsets
   (stream.worker.lane). The records of a partition whose transaction can commit no more
   (the partition moved to another worker) are let go instead, never acknowledged, and the
   worker gives the partition up (stream.worker.fencing).
And batch N+1's first step begins only once batch N's last has finished.

Why this order, at least once: a crash before the changelog lands replays the batch against the
old state, which gives the same outputs again, byte for byte; a crash after it replays against
the new state, which the engine recognises by source offset; so a commit never covers a record
whose outputs or state could still be lost. Batches commit one after another so the changelog
holds each session's states in order, and so no batch is acknowledged while an earlier one
could still fail (its replay would meet the later state and lose its outputs). Exactly once, a
crash or a fence leaves the transaction uncommitted: none of its outputs, state or offset
counts, and the partition's next owner processes the batch again from the state and offset
before it.

The next batch is processed while one is committed (its table writes are already visible,
stream.worker.tables); a rebalance or a stop waits for the batch in delivery, whose records
stay unacknowledged until step 2 (stream.worker.lane).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
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

    def let_go(self, messages: Sequence[Message]) -> None:
        """Stop waiting for `messages` without acknowledging them: their partition's next
        owner processes them again."""
        ...


class Delivery(Protocol):
    """How a batch's outputs and changelog reach the broker, and what the lane tells it of
    the assignment."""

    @property
    def offsets_in_transactions(self) -> bool:
        """Whether the delivery commits the input offsets itself (Faust must not)."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def assigned(self, partitions: set[int]) -> None:
        """The input partitions the group just assigned, before anything of them is read."""
        ...

    async def revoked(self) -> None:
        """The assignment ended, after the batches in delivery were committed."""
        ...

    async def deliver(self, batch: ProcessedBatch, messages: Sequence[Message]) -> set[int]:
        """Deliver `batch`, processed from `messages`; the input partitions whose records
        were not delivered and never will be from here (exactly once: the partition moved)."""
        ...


class AtLeastOnce:
    """Outputs, then changelog, each until the broker has every record; nothing is lost, and
    a crash in between sends the same outputs again."""

    offsets_in_transactions = False

    def __init__(self, make_producer: Callable[[], AIOKafkaProducer], dlq_topic: str) -> None:
        self._make_producer = make_producer
        self._producer: AIOKafkaProducer | None = None
        self._instead = notice_instead(dlq_topic)

    async def start(self) -> None:
        self._producer = self._make_producer()  # inside the event loop
        await self._producer.start()

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()

    async def assigned(self, partitions: set[int]) -> None:
        pass

    async def revoked(self) -> None:
        pass

    async def deliver(self, batch: ProcessedBatch, messages: Sequence[Message]) -> set[int]:
        if self._producer is None:
            raise RuntimeError("the delivery has not started")
        await deliver_until_done(self._producer, batch.outputs, self._instead)
        await deliver_until_done(self._producer, batch.changelog, keep_unsaved)
        return set()


class EarlierCommitFailed(Exception):
    """The batch before this one was not committed: this one is neither sent nor acknowledged,
    as its acks would let Faust commit past records whose outputs may be lost."""


class Committer:
    """Commits processed batches, in the order they are given, one after another."""

    def __init__(self, delivery: Delivery, acknowledger: Acknowledger, metrics: WorkerMetrics,
                 *, give_up: Callable[[set[int]], Awaitable[None]] | None = None) -> None:
        self._delivery = delivery
        self._acknowledger = acknowledger
        self._metrics = metrics
        self._give_up = give_up  # what the worker does with partitions it can commit no more
        self._in_flight: asyncio.Task[None] | None = None  # the last batch given

    async def commit(self, batch: ProcessedBatch, messages: Sequence[Message], *,
                     started: float) -> None:
        """Start committing `batch` (processed from `messages` since `started`) and return once
        the batch given before it is committed: the caller processes the next batch meanwhile.
        Raises what stopped the batch before (a DeliveryFailed, an EarlierCommitFailed)."""
        previous = self._in_flight
        self._in_flight = asyncio.ensure_future(self._commit(previous, batch, messages, started))
        if previous is not None:
            waiting = time.monotonic()
            try:
                await previous
            finally:
                self._metrics.commit_wait_seconds.observe(time.monotonic() - waiting)

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
        delivering = time.monotonic()
        lost = await self._delivery.deliver(batch, messages)
        self._metrics.delivery_seconds.observe(time.monotonic() - delivering)
        if lost:
            self._acknowledger.let_go([m for m in messages if m.partition in lost])
            messages = [m for m in messages if m.partition not in lost]
            if self._give_up is not None:
                await self._give_up(lost)
        self._acknowledger.ack_all(messages)
        self._observe(messages, started)

    def _observe(self, messages: Sequence[Message], started: float) -> None:
        """What the batch took, from its processing to its acks."""
        self._metrics.batch_seconds.observe(time.monotonic() - started)
        now = time.time()
        self._metrics.record_latency.observe_many(
            max(0.0, now - message.timestamp) for message in messages if message.timestamp)


def notice_instead(dlq_topic: str) -> Callable[[OutRecord, Exception], OutRecord]:
    """What a delivery sends in place of an output the broker refuses as too large."""
    def instead(out: OutRecord, error: Exception) -> OutRecord:
        log.error("an output of %d bytes for %s is larger than the broker accepts (%s); "
                  "sending a dead-letter notice instead", len(out.value), out.topic,
                  type(error).__name__)
        return too_large_notice(out, dlq_topic)

    return instead


def too_large_notice(out: OutRecord, dlq_topic: str) -> OutRecord:
    """A dead letter standing in for an output the broker refuses as too large: where it
    came from and how large it was, without the bytes."""
    reason = f"{len(out.value)}-byte output for {out.topic} is larger than the broker accepts"
    key = out.key.decode("utf-8", "backslashreplace") if out.key is not None else ""
    letter = DeadLetter(key, out.source, reason, b"")
    return dead_letter_record(dlq_topic, out.partition, out.key, letter, out.source,
                              raw_omitted=True)


def keep_unsaved(record: ChangelogRecord, error: Exception) -> None:
    # Only a hostile entry id of megabytes makes a state value too large for the broker. The
    # table keeps the value; a restart recovers the session without it.
    log.error("the broker refuses a %d-byte changelog value for %s (%s); the session's "
              "state is kept in memory only", len(record.value or b""), record.topic,
              type(error).__name__)
