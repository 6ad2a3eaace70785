"""The producer every component sends with, and the two ways it sends.

What the sources publish goes through an idempotent producer where the broker grants one
(`start_idempotent_producer`): a batch the producer sends again after a lost answer is written
once. Tansu refuses aiokafka's idempotent producer, so there they send with a plain one.

Sources send records one by one in order, a bounded window of them unacknowledged at a time
(`send_records`). The worker sends thousands per batch (outputs and changelog values): per-record
sends cost a future, a callback and buffering for every record, so `deliver_until_done` fills
aiokafka batches itself, one per topic partition, awaits one future per batch, and retries
until the broker has every record. Order within a partition is kept either way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol, TypeVar

from aiokafka import AIOKafkaProducer
from aiokafka.errors import (
    KafkaError,
    MessageSizeTooLargeError,
    ProducerClosed,
    RecordTooLargeError,
)

from stream.kafka.configuration import MAX_RECORD_BYTES, REQUEST_TIMEOUT_MS, client_options
from stream.kafka.retry import Backoff, curable
from stream.settings import Settings

log = logging.getLogger(__name__)

# errors a resend cannot cure: the broker refuses the record at any time
NEVER_FITS = (MessageSizeTooLargeError, RecordTooLargeError)
# Kafka record headers, (name, value) pairs.
Headers = tuple[tuple[str, bytes], ...]
# Sends awaited together: bounds the futures (and so the unsent records) held at once
# while still letting the producer fill whole batches between waits.
SEND_WINDOW = 1000


class RoutedRecord(Protocol):
    """A record that names its own topic and partition (the worker's outputs and changelog
    records)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> list[tuple[str, bytes]] | None: ...


R = TypeVar("R", bound=RoutedRecord)


class DeliveryFailed(Exception):
    """Records that can never be delivered by this producer: it was stopped before the
    broker had them all (a retry would only fail again)."""


def make_producer(settings: Settings, *, linger_ms: int = 10,
                  idempotent: bool = False) -> AIOKafkaProducer:
    """The producer of every component; call it inside the event loop.

    `linger_ms` is how long an open batch waits for more records before it goes out. The
    records of one `send_records` call are appended before the producer's sender runs (up to
    its window), so they leave together whatever the linger: a caller that sends all it has at
    once, as the live sources do, gains nothing by waiting and gives 0.

    The default partitioner hashes keys with murmur2 like the Java and librdkafka clients, so
    a session lands on the same partition whichever client published it. aiokafka keeps one
    request in flight per broker, so retries cannot reorder a session's records.
    Idempotence only where asked: Tansu rejects aiokafka's InitProducerId.
    """
    return AIOKafkaProducer(
        **client_options(settings),
        acks="all",
        enable_idempotence=idempotent,
        linger_ms=linger_ms,
        max_batch_size=1024 * 1024,
        # what the project's topics accept
        max_request_size=MAX_RECORD_BYTES,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )


async def start_idempotent_producer(settings: Settings, *, linger_ms: int = 10,
                                   ) -> AIOKafkaProducer:
    """A started producer, idempotent where the broker grants it (Apache Kafka), plain where it
    refuses (Tansu: one line says so). A broker that does not answer raises, as a plain
    producer's start does."""
    try:
        with init_refusals_unlogged():
            return await _started(make_producer(settings, linger_ms=linger_ms, idempotent=True))
    except KafkaError as error:
        if curable(error):
            raise
        log.info("the broker at %s grants no idempotent producer (%s): a send retried after a "
                 "lost answer may write a record twice, which the worker drops as a redelivery",
                 settings.bootstrap, type(error).__name__)
    return await _started(make_producer(settings, linger_ms=linger_ms))


async def _started(producer: AIOKafkaProducer) -> AIOKafkaProducer:
    try:
        await producer.start()
    except BaseException:
        await producer.stop()
        raise
    return producer


@contextmanager
def init_refusals_unlogged() -> Iterator[None]:
    """aiokafka logs a refused InitProducerId as an error of its own; the caller says it in
    its own words."""
    sender_log = logging.getLogger("aiokafka.producer.sender")
    was_disabled, sender_log.disabled = sender_log.disabled, True
    try:
        yield
    finally:
        sender_log.disabled = was_disabled


async def send_records(
    producer: AIOKafkaProducer,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes] | tuple[bytes | None, bytes, Headers]],
    window: int = SEND_WINDOW,
) -> int:
    """Send (key, value) or (key, value, headers) records in order and wait until all are
    acknowledged; returns the count.

    Raises the first delivery error (a KafkaError), but only once every record sent before it
    has been acknowledged or has failed too: a caller that sends the records again (a source
    whose broker went away, stream.kafka.retry) then puts its copies after all of them.
    """
    pending: list[asyncio.Future] = []
    sent = 0
    try:
        for key, value, *rest in records:
            headers = list(rest[0]) if rest else None
            pending.append(await producer.send(topic, value=value, key=key, headers=headers))
            if len(pending) >= window:
                sent += await _acknowledged(pending)
    except Exception:
        await asyncio.gather(*pending, return_exceptions=True)
        raise
    return sent + await _acknowledged(pending)


async def _acknowledged(pending: list[asyncio.Future]) -> int:
    results = await asyncio.gather(*pending, return_exceptions=True)
    pending.clear()
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return len(results)


async def deliver_until_done(
    producer: AIOKafkaProducer,
    records: Sequence[R],
    instead_of_too_large: Callable[[R, Exception], R | None],
) -> None:
    """Send until the broker has every record. A record the broker can never take is
    replaced by what `instead_of_too_large` returns (None: nothing); other failures are
    retried with backoff, and resending is harmless: the same bytes with the same ids.
    Raises DeliveryFailed if the producer is stopped first."""
    pending: Sequence[R] = records
    backoff = Backoff()
    while pending:
        failed = await send(producer, pending)
        closed = next((error for _, error in failed if isinstance(error, ProducerClosed)), None)
        if closed is not None:
            raise DeliveryFailed(f"the producer stopped with {len(failed)} of {len(pending)} "
                                 "records undelivered") from closed
        retry = [instead_of_too_large(record, error) if isinstance(error, NEVER_FITS)
                 else record for record, error in failed]
        pending = [record for record in retry if record is not None]
        if pending:
            delay = backoff.next()
            log.warning("could not deliver %d records (%s); retrying in %.1fs", len(pending),
                        type(failed[0][1]).__name__, delay)
            await asyncio.sleep(delay)


async def send(producer: AIOKafkaProducer,
               records: Sequence[R]) -> list[tuple[R, Exception]]:
    """Send every record; the ones that failed, with their errors. A batch refused as too
    large is sent again record by record, so the error names the record that caused it."""
    by_partition: dict[tuple[str, int], list[R]] = {}
    for record in records:
        by_partition.setdefault((record.topic, record.partition), []).append(record)
    sent: list[tuple[list[R], asyncio.Future]] = []
    failed: list[tuple[R, Exception]] = []
    for (topic, partition), group in by_partition.items():
        for chunk, batch in _batches(producer, group):
            try:
                sent.append((chunk, await producer.send_batch(batch, topic, partition=partition)))
            except Exception as error:  # noqa: BLE001 - reported to the caller, which decides
                failed += [(record, error) for record in chunk]
    results = await asyncio.gather(*(future for _, future in sent), return_exceptions=True)
    for (chunk, _), result in zip(sent, results, strict=True):
        if not isinstance(result, Exception):
            continue
        if isinstance(result, NEVER_FITS) and len(chunk) > 1:
            failed += await _one_by_one(producer, chunk)
        else:
            failed += [(record, result) for record in chunk]
    return failed


async def _one_by_one(producer: AIOKafkaProducer,
                      records: list[R]) -> list[tuple[R, Exception]]:
    failed: list[tuple[R, Exception]] = []
    for record in records:
        failed += await send(producer, [record])
    return failed


def _batches(producer: AIOKafkaProducer, records: list[R]):
    """Producer batches holding the records in order; a batch takes at least one record,
    however large, and the broker judges it. A batch that is not full is closed too: the
    producer holds an open batch for `linger_ms` in case more records come, and none will:
    the delivery would wait that long twice, for its outputs and for its changelog."""
    batch, chunk = producer.create_batch(), []
    for record in records:
        if batch.append(key=record.key, value=record.value, timestamp=None,
                        headers=record.headers or []) is None:
            yield chunk, batch
            batch, chunk = producer.create_batch(), []
            batch.append(key=record.key, value=record.value, timestamp=None,
                         headers=record.headers or [])
        chunk.append(record)
    if chunk:
        batch.close()
        yield chunk, batch
