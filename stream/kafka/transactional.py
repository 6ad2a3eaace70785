"""Transactional producers: whether the broker grants them, one per input partition, and a
transaction that commits a partition's records with its input offset, or nothing.

Why one producer per input partition: aiokafka 0.14 adds a transaction's input offsets with
TxnOffsetCommit v0, which names the consumer group but not the member or its generation, so the
broker cannot refuse the offsets of a worker that lost the partition by its group membership
(KIP-447's way, one producer per worker). It refuses them by the transactional id instead:
`<app-id>-<input topic>-<partition>`, as Faust's and Kafka Streams' first exactly-once modes
have it. A worker given a partition starts its producer (InitProducerId), which bumps the id's
epoch: the previous owner's producer is fenced (any request of its transaction fails), and its
open transaction is aborted, or finished if it was committing, before the start returns. So a
producer is started only for a partition the group just assigned, and never again within that
assignment: a second start would fence whoever owns the partition now.

Within a transaction a send the broker refuses (a record larger than it accepts) leaves
aiokafka's sequence number for that topic partition ahead of the broker's, and every later send
to it fails too: the transaction is aborted, the sequence numbers are set back to what the
broker appended, and the transaction is made again without what can never be sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    IllegalOperation,
    KafkaError,
    OutOfOrderSequenceNumber,
    ProducerFenced,
)

from stream.kafka import internals
from stream.kafka.configuration import MAX_RECORD_BYTES, REQUEST_TIMEOUT_MS, client_options
from stream.kafka.producer import NEVER_FITS, RoutedRecord, init_refusals_unlogged
from stream.kafka.retry import Backoff, curable
from stream.settings import Settings

log = logging.getLogger(__name__)

R = TypeVar("R", bound=RoutedRecord)

# How long the probe at start waits for a transaction coordinator: a first InitProducerId on a
# fresh Apache Kafka creates its transaction log (50 partitions), seconds on a busy box; a broker
# whose transaction log cannot be created answers "not available" for ever.
PROBE_TIMEOUT_S = 30.0
# aiokafka's default. A worker that stalls longer than this with a transaction open has it
# aborted by the broker, and finds its producer fenced when it resumes.
TRANSACTION_TIMEOUT_MS = 60_000


class TransactionLost(Exception):
    """The partition's producer can commit nothing more: it was fenced (the partition moved to
    another worker, or the broker aborted a transaction open too long) or it failed for good.
    Nothing of the transaction is committed."""


def transactional_id(settings: Settings, partition: int) -> str:
    return f"{settings.app_id}-{settings.input_topic}-{partition}"


def make_transactional_producer(settings: Settings, transactional_id: str) -> AIOKafkaProducer:
    """The worker's producer for one input partition; call it inside the event loop. Idempotent
    with it (aiokafka turns idempotence on for a transactional id): acks=all, a retried batch is
    written once."""
    return AIOKafkaProducer(
        **client_options(settings),
        transactional_id=transactional_id,
        transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
        # a delivery closes its batches itself (stream.kafka.producer); nothing lingers
        linger_ms=0,
        max_batch_size=1024 * 1024,
        max_request_size=MAX_RECORD_BYTES,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )


async def transactions_refused(settings: Settings,
                               timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the broker grants no transactional producer, or None when it grants one.

    The probe's transactional id is the app's own (`<app-id>-probe`), never a partition's: its
    start fences nothing a worker commits with."""
    producer = make_transactional_producer(settings, f"{settings.app_id}-probe")
    try:
        with init_refusals_unlogged():
            await asyncio.wait_for(producer.start(), timeout)
    except TimeoutError:
        return f"no transaction coordinator answered within {timeout:.0f}s"
    except KafkaError as error:
        return f"it refused InitProducerId ({type(error).__name__})"
    finally:
        await producer.stop()
    return None


class PartitionProducers:
    """A started transactional producer per input partition of the current assignment."""

    def __init__(self, make: Callable[[int], AIOKafkaProducer], broker: str) -> None:
        self._make = make
        self._broker = broker
        self._producers: dict[int, AIOKafkaProducer] = {}

    async def assign(self, partitions: Iterable[int]) -> None:
        """Start a producer for each of `partitions`, the previous assignment's stopped first.

        Each start fences the partition's previous owner and ends its open transaction before
        it returns, so what is read of the partition afterwards (the committed offset, the
        changelogs) cannot change under this worker. A start the broker's absence fails is
        tried again with backoff; one no wait cures leaves the partition without a producer,
        and its batches are let go (stream.worker.exactly_once)."""
        await self.close()
        started = await asyncio.gather(*(self._start(p) for p in sorted(set(partitions))))
        self._producers = {p: producer for p, producer in started if producer is not None}

    async def _start(self, partition: int) -> tuple[int, AIOKafkaProducer | None]:
        backoff = Backoff()
        while True:
            producer = self._make(partition)
            try:
                await producer.start()
            except KafkaError as error:
                await producer.stop()
                if not curable(error):
                    log.error("no transactional producer for input partition %d: %s",
                              partition, error)
                    return partition, None
                delay = backoff.next()
                log.warning("starting the transactional producer of input partition %d "
                            "failed: the broker at %s did not take it (%s); retrying in %.1fs",
                            partition, self._broker, error, delay)
                await asyncio.sleep(delay)
                continue
            return partition, producer

    def get(self, partition: int) -> AIOKafkaProducer | None:
        """The partition's producer; None once lost, or when it is not assigned here."""
        return self._producers.get(partition)

    async def lose(self, partition: int) -> None:
        """Stop the partition's producer and start none again before the next assignment."""
        producer = self._producers.pop(partition, None)
        if producer is not None:
            await _stop(producer)

    async def close(self) -> None:
        producers, self._producers = list(self._producers.values()), {}
        await asyncio.gather(*(_stop(producer) for producer in producers))


async def _stop(producer: AIOKafkaProducer) -> None:
    internals.forget_transaction_failure(producer)
    try:
        await producer.stop()
    except KafkaError as error:  # a fenced producer's last words
        log.debug("stopping a transactional producer: %r", error)


async def commit_transaction(
    producer: AIOKafkaProducer,
    records: Sequence[R],
    offsets: Mapping[TopicPartition, int],
    group_id: str,
    instead_of_too_large: Callable[[R, Exception], R | None],
) -> None:
    """Send `records` and commit the input `offsets` for `group_id` in one transaction, made
    again until it commits: a record the broker can never take is replaced by what
    `instead_of_too_large` returns (None: left out), other failures are tried again with
    backoff. Raises TransactionLost, with nothing committed, when the producer can commit no
    more."""
    pending: Sequence[R] = records
    alone: set[int] = set()  # ids of records to send in a producer batch of their own
    stand_ins: set[int] = set()  # ids of the records put in for others
    backoff = Backoff()
    while True:
        try:
            _raise_if_lost(producer)
            await producer.begin_transaction()
            appended, failed = await _send(producer, pending, alone)
            if not failed:
                if offsets:
                    await producer.send_offsets_to_transaction(dict(offsets), group_id)
                _raise_if_lost(producer)
                await producer.commit_transaction()
                return
        except ProducerFenced as error:
            raise TransactionLost(repr(error)) from error
        except (KafkaError, IllegalOperation) as error:
            # the offsets or the commit were refused, or the producer failed meanwhile (then
            # it is in no transaction any more): the transaction holds nothing for sure
            _raise_if_lost(producer)
            appended, failed = {}, [([], error)]
        await _abort(producer, appended, failed)
        pending, retry = _without_what_never_fits(pending, failed, alone, stand_ins,
                                                  instead_of_too_large)
        if retry is not None:
            delay = backoff.next()
            log.warning("a transaction of %d records failed (%r); making it again in %.1fs",
                        len(pending), retry, delay)
            await asyncio.sleep(delay)


def _raise_if_lost(producer: AIOKafkaProducer) -> None:
    failure = internals.transaction_failure(producer)
    if failure is not None:
        raise TransactionLost(repr(failure)) from failure


async def _abort(producer: AIOKafkaProducer, appended: Mapping[TopicPartition, tuple[int, int]],
                 failed: list[tuple[list[R], Exception]]) -> None:
    """Abort the transaction, and set each topic partition's sequence number back to the
    broker's: where it stood before the sends plus the records the broker appended
    (`appended`, by topic partition). TransactionLost when it cannot be aborted."""
    fenced = next((error for _, error in failed if isinstance(error, ProducerFenced)), None)
    if fenced is not None:
        raise TransactionLost(repr(fenced)) from fenced
    try:
        _raise_if_lost(producer)
        await producer.abort_transaction()
    except KafkaError as error:
        raise TransactionLost(repr(error)) from error
    internals.set_sequences(producer, {tp: start + count
                                       for tp, (start, count) in appended.items()})


async def _send(producer: AIOKafkaProducer, records: Sequence[R], alone: set[int],
                ) -> tuple[dict[TopicPartition, tuple[int, int]],
                           list[tuple[list[R], Exception]]]:
    """Send every record in producer batches, one per topic partition and size (a record of
    `alone` in a batch of its own), and wait for all. Returns, per topic partition, its
    sequence number before these sends and how many records the broker appended; and each
    chunk of records that failed, with its error."""
    by_partition: dict[TopicPartition, list[R]] = {}
    for record in records:
        by_partition.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
    starts = internals.sequences(producer, by_partition)
    sent: list[tuple[TopicPartition, list[R], asyncio.Future]] = []
    failed: list[tuple[list[R], Exception]] = []
    for tp, group in by_partition.items():
        for chunk, batch in _batches(producer, group, alone):
            try:
                future = await producer.send_batch(batch, tp.topic, partition=tp.partition)
            except (KafkaError, IllegalOperation) as error:  # IllegalOperation: it failed
                failed.append((chunk, error))
                continue
            sent.append((tp, chunk, future))
    results = await asyncio.gather(*(future for _, _, future in sent), return_exceptions=True)
    appended: Counter[TopicPartition] = Counter()
    for (tp, chunk, _), result in zip(sent, results, strict=True):
        if isinstance(result, Exception):
            failed.append((chunk, result))
        else:
            appended[tp] += len(chunk)
    return {tp: (start, appended[tp]) for tp, start in starts.items()}, failed


def _batches(producer: AIOKafkaProducer, records: list[R], alone: set[int]):
    """Closed producer batches (see stream.kafka.producer) holding `records` in order, a
    record of `alone` in a batch of its own."""
    batch, chunk = producer.create_batch(), []
    for record in records:
        # `_append` is tried last: it adds the record to the batch when it fits
        if chunk and (id(record) in alone or id(chunk[-1]) in alone
                      or not _append(batch, record)):
            batch.close()
            yield chunk, batch
            batch, chunk = producer.create_batch(), []
        if not chunk:
            _append(batch, record)  # a batch takes its first record, however large
        chunk.append(record)
    if chunk:
        batch.close()
        yield chunk, batch


def _append(batch, record: RoutedRecord) -> bool:
    return batch.append(key=record.key, value=record.value, timestamp=None,
                        headers=record.headers or []) is not None


def _without_what_never_fits(
    records: Sequence[R], failed: list[tuple[list[R], Exception]], alone: set[int],
    stand_ins: set[int], instead_of_too_large: Callable[[R, Exception], R | None],
) -> tuple[list[R], Exception | None]:
    """The records of the next try: a record refused as too large in a batch of its own is
    replaced (a stand-in refused too is left out), the records of a larger batch refused so
    are sent one per batch (which of them is too large is not known), the rest go as they
    were. Also the first failure only time may cure (None: the next try need not wait)."""
    too_large: dict[int, Exception] = {}
    retry: Exception | None = None
    for chunk, error in failed:
        if isinstance(error, NEVER_FITS):
            if len(chunk) == 1:
                too_large[id(chunk[0])] = error
            else:
                alone.update(map(id, chunk))
        elif not isinstance(error, OutOfOrderSequenceNumber) and retry is None:
            # (an out-of-order send followed a refused one: the sequence numbers are set back)
            retry = error
    kept: list[R] = []
    for record in records:
        error = too_large.get(id(record))
        if error is None:
            kept.append(record)
        elif id(record) in stand_ins:
            log.error("a %d-byte stand-in for a record too large for %s is refused too; left "
                      "out", len(record.value or b""), record.topic)
        elif (instead := instead_of_too_large(record, error)) is not None:
            stand_ins.add(id(instead))
            kept.append(instead)
    return kept, retry
