"""Sends a batch's records as one producer batch per topic partition, until all are in.

Per-record sends cost a future, a callback and Faust's buffering for every record; the
worker sends thousands per batch (outputs and changelog values), so it fills aiokafka
batches itself and awaits one future per partition. Order within a partition is kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from aiokafka import AIOKafkaProducer
from aiokafka.errors import MessageSizeTooLargeError, RecordTooLargeError

log = logging.getLogger(__name__)

# errors a resend cannot cure: the broker refuses the record at any time
NEVER_FITS = (MessageSizeTooLargeError, RecordTooLargeError)
MAX_BACKOFF_S = 30.0


class Record(Protocol):
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


R = TypeVar("R", bound=Record)


async def deliver_until_done(
    producer: AIOKafkaProducer,
    records: Sequence[R],
    instead_of_too_large: Callable[[R, Exception], R | None],
) -> None:
    """Send until the broker has every record. A record the broker can never take is
    replaced by what `instead_of_too_large` returns (None: nothing); other failures are
    retried with backoff, and resending is harmless: the same bytes with the same ids."""
    pending: Sequence[R] = records
    delay = 0.5
    while pending:
        failed = await send(producer, pending)
        retry = [instead_of_too_large(record, error) if isinstance(error, NEVER_FITS)
                 else record for record, error in failed]
        pending = [record for record in retry if record is not None]
        if pending:
            log.warning("could not deliver %d records (%s); retrying in %.1fs", len(pending),
                        type(failed[0][1]).__name__, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF_S)


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
    producer holds an open batch for `linger_ms` in case more records come, and none will
    (twice per delivery, outputs and changelog, that was a fifth of a worker's time)."""
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
