"""`session-stream tail`: print the records of one topic readably, one line each, after the
time of the record.

Transcript text never reaches the terminal: entries show their type, id and role only, dead
letters their reason and size. Alerts show their message, which the engine writes for operators.
The consumer joins no group (it assigns every partition itself), so it never takes partitions
from, or commits offsets for, the worker.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from datetime import UTC, datetime
from typing import TextIO

import orjson
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from stream.kafka.consumer import (
    METADATA_GRACE,
    caught_up,
    make_consumer,
    topic_partitions,
)
from stream.settings import Settings

ROLES = ("alerts", "clean", "dlq", "input")
IDLE_TIMEOUT = 1.5
POLL_MS = 200


def topic_of(settings: Settings, role: str) -> str:
    return {
        "alerts": settings.alerts_topic,
        "clean": settings.clean_topic,
        "dlq": settings.dlq_topic,
        "input": settings.input_topic,
    }[role]


async def read_topic(
    settings: Settings,
    topic: str,
    follow: bool,
    idle_timeout: float = IDLE_TIMEOUT,
    from_beginning: bool = True,
) -> AsyncIterator[ConsumerRecord]:
    """Records of every partition of `topic`; without `follow`, ends once all were read.

    The end is where every partition is caught up, or, should that never happen, after
    `idle_timeout` seconds without a record.
    Close the iterator (`contextlib.aclosing`) when leaving it early, which stops the consumer.
    """
    consumer = make_consumer(settings)
    try:
        await consumer.start()
        partitions = await topic_partitions(consumer, [topic], wait=follow)
        consumer.assign(partitions)
        if from_beginning:
            await consumer.seek_to_beginning(*partitions)
        else:
            await _seek_to_end(consumer, partitions)
        loop = asyncio.get_running_loop()
        last_record = loop.time()
        while True:
            batches = await consumer.getmany(*partitions, timeout_ms=POLL_MS)
            for records in batches.values():
                for record in records:
                    yield record
            if batches:
                last_record = loop.time()
            if not follow and (
                loop.time() - last_record >= idle_timeout or await caught_up(consumer, partitions)
            ):
                return
    finally:
        await consumer.stop()


async def _seek_to_end(consumer: AIOKafkaConsumer, partitions: list[TopicPartition]) -> None:
    """Start after the records already there.

    On Tansu ListOffsets(latest) may lie short of the end but never beyond it, so the
    consumer starts there until fetch responses report the true high watermarks; the
    records fetched meanwhile lie before those and are skipped.
    """
    hints = await consumer.end_offsets(partitions)
    for partition in partitions:
        consumer.seek(partition, hints[partition])
    loop = asyncio.get_running_loop()
    # Apache Kafka holds a fetch at the end for fetch_max_wait_ms, longer than one poll.
    deadline = loop.time() + METADATA_GRACE
    while loop.time() < deadline and any(consumer.highwater(p) is None for p in partitions):
        await consumer.getmany(*partitions, timeout_ms=POLL_MS)
    for partition in partitions:
        consumer.seek(partition, max(hints[partition], consumer.highwater(partition) or 0))


def format_record(role: str, record: ConsumerRecord) -> str:
    """One line describing `record` of the topic with `role` (see ROLES)."""
    return _FORMATS[role](record)


def record_time(record: ConsumerRecord) -> str:
    """The record's Kafka timestamp in UTC (when the worker raised an alert): the time lives in
    the record, not in the alert, whose bytes the same input always makes the same."""
    moment = datetime.fromtimestamp(record.timestamp / 1000, UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _format_alert(record: ConsumerRecord) -> str:
    alert = _json_object(record.value)
    if alert is None:
        return _unparsed(record, "alert")
    return " ".join(
        (
            _field(alert.get("severity")),
            _field(alert.get("kind")),
            f"session={_field(alert.get('session_id'))}",
            f"entry={_field(alert.get('entry_id'))}",
            _field(alert.get("message")),
        )
    )


def _format_entry(record: ConsumerRecord) -> str:
    entry = _json_object(record.value)
    if entry is None:
        return _unparsed(record, "entry")
    message = entry.get("message")
    role = message.get("role") if isinstance(message, dict) else None
    return (
        f"session={_key(record)} {_field(entry.get('type'))} "
        f"id={_field(entry.get('id'))} role={_field(role)}"
    )


def _format_dead_letter(record: ConsumerRecord) -> str:
    letter = _json_object(record.value) or {}
    reason = _header(record, "reason") or letter.get("reason")
    return f"session={_key(record)} reason={_field(reason)} bytes={_raw_size(record, letter)}"


_FORMATS: dict[str, Callable[[ConsumerRecord], str]] = {
    "alerts": _format_alert,
    "clean": _format_entry,
    "input": _format_entry,
    "dlq": _format_dead_letter,
}


def _raw_size(record: ConsumerRecord, letter: dict) -> int:
    """Size of the dead-lettered line: the body's `raw` when it has one, else the value."""
    raw = letter.get("raw")
    if isinstance(raw, str):
        if letter.get("raw_encoding") != "base64":
            return len(raw.encode("utf-8"))
        try:
            return len(base64.b64decode(raw, validate=True))
        except binascii.Error:
            pass
    return len(record.value or b"")


def _unparsed(record: ConsumerRecord, what: str) -> str:
    return f"session={_key(record)} unparsable-{what} bytes={len(record.value or b'')}"


def _json_object(value: bytes | None) -> dict | None:
    try:
        parsed = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _header(record: ConsumerRecord, name: str) -> str | None:
    for key, value in record.headers or ():
        if key == name:
            return value.decode("utf-8", "backslashreplace")
    return None


def _key(record: ConsumerRecord) -> str:
    if record.key is None:
        return "-"
    return _printable(record.key.decode("utf-8", "backslashreplace"))


def _field(value: object) -> str:
    """A scalar for display; structures are left out since they may hold transcript text."""
    if isinstance(value, str) and value:
        return _printable(value)
    if isinstance(value, bool | int | float):
        return str(value)
    return "-"


def _printable(text: str) -> str:
    """Escapes newlines and control characters: one record stays one line, and bytes from the
    topic cannot drive the terminal."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


async def tail(
    settings: Settings,
    role: str,
    *,
    follow: bool,
    from_beginning: bool,
    limit: int | None,
    out: TextIO,
) -> None:
    records = read_topic(settings, topic_of(settings, role), follow, from_beginning=from_beginning)
    async with aclosing(records):
        printed = 0
        async for record in records:
            print(record_time(record), format_record(role, record), file=out, flush=follow)
            printed += 1
            if printed == limit:
                return
