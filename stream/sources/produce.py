"""`session-stream produce`: publish session files to the input topic, one record per line.

Each non-blank line becomes one record, keyed by the session id and carrying the line byte for
byte (malformed lines too: the worker dead-letters them). Records of one session share a key,
hence a partition, and are sent in file order, so the worker sees every session in order.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from stream.brokers import create_topics
from stream.kafka.configuration import client_options
from stream.settings import MAX_RECORD_BYTES, TOPIC_CONFIG, Settings, add_options
from stream.sources.session_files import (
    READ_ERRORS,
    find_session_files,
    open_lines,
    read_error_reason,
    session_id_of,
)

# Kafka record headers, (name, value) pairs: what stream.sources.publish.Headers names.
Headers = tuple[tuple[str, bytes], ...]
# Sends awaited together: bounds the futures (and so the unsent records) held at once
# while still letting the producer fill whole batches between waits.
SEND_WINDOW = 1000
# Bounds start-up against a dead or unreachable broker, and every produce request.
REQUEST_TIMEOUT_MS = 15_000


@dataclass
class ProduceReport:
    files: int = 0
    records: int = 0
    per_session: Counter[str] = field(default_factory=Counter)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)

    def summary(self, topic: str) -> str:
        text = (
            f"produced {self.records} records of {len(self.per_session)} sessions "
            f"from {self.files} files to {topic}"
        )
        if self.unreadable:
            text += f"; {len(self.unreadable)} unreadable"
        return text


def ensure_input_topic(settings: Settings) -> None:
    """Published before any worker ran, the topic would be auto-created with the broker's
    default partition count, which the worker's co-partitioned topics may not match."""
    create_topics(
        settings.bootstrap,
        {settings.input_topic: settings.partitions},
        config=TOPIC_CONFIG,
        replication_factor=settings.replication,
        client_options=client_options(settings),
    )


def make_producer(settings: Settings) -> AIOKafkaProducer:
    """The producer every source of session events uses; call it inside the event loop.

    The default partitioner hashes keys with murmur2 like the Java and librdkafka clients, so
    a session lands on the same partition whichever client published it. aiokafka keeps one
    request in flight per broker, so retries cannot reorder a session's records.
    Idempotence stays off: Tansu rejects aiokafka's InitProducerId.
    """
    return AIOKafkaProducer(
        **client_options(settings),
        acks="all",
        enable_idempotence=False,
        linger_ms=10,
        max_batch_size=1024 * 1024,
        # what the worker's topics accept (see MAX_RECORD_BYTES)
        max_request_size=MAX_RECORD_BYTES,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )


async def send_records(
    producer: AIOKafkaProducer,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes] | tuple[bytes | None, bytes, Headers]],
    window: int = SEND_WINDOW,
) -> int:
    """Send (key, value) or (key, value, headers) records in order and wait until all are
    acknowledged; returns the count.

    Raises the first delivery error (a KafkaError).
    """
    pending: list[asyncio.Future] = []
    sent = 0
    for key, value, *rest in records:
        headers = list(rest[0]) if rest else None
        pending.append(await producer.send(topic, value=value, key=key, headers=headers))
        if len(pending) >= window:
            sent += await _acknowledged(pending)
    return sent + await _acknowledged(pending)


async def _acknowledged(pending: list[asyncio.Future]) -> int:
    await asyncio.gather(*pending)
    count = len(pending)
    pending.clear()
    return count


def read_session(path: Path) -> tuple[str, list[bytes]]:
    """(session id, non-blank lines) of one file, read whole so a file that fails part-way
    is not half sent."""
    lines = [body for _, body in open_lines(path)]
    return session_id_of(path, lines[0] if lines else None), lines


async def produce_files(settings: Settings, paths: list[str]) -> ProduceReport:
    """Publish every session file under `paths` to the input topic.

    Unreadable files are listed in the report and skipped; broker errors raise KafkaError.
    """
    report = ProduceReport()
    producer = make_producer(settings)
    try:
        await producer.start()
        for given in map(Path, paths):
            for path in find_session_files(given):
                try:
                    session_id, lines = read_session(path)
                except READ_ERRORS as error:
                    report.unreadable.append((path, read_error_reason(error)))
                    continue
                key = session_id.encode("utf-8")
                sent = await send_records(
                    producer, settings.input_topic, ((key, line) for line in lines)
                )
                report.files += 1
                report.records += sent
                if sent:
                    report.per_session[session_id] += sent
    finally:
        await producer.stop()
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="session file or directory")
    add_options(parser, ("broker", "partitions", "replication", "input_topic"))


def main(args: argparse.Namespace, stderr: TextIO | None = None) -> int:
    """Exit 0 when everything was sent, 1 when an input was unreadable or the broker failed."""
    stderr = stderr or sys.stderr
    settings = Settings.load(args)
    try:
        ensure_input_topic(settings)
        report = asyncio.run(produce_files(settings, args.paths))
    except KafkaError as error:
        print(
            f"session-stream: cannot publish to the Kafka broker at {settings.bootstrap}: {error}",
            file=stderr,
        )
        return 1
    for path, reason in report.unreadable:
        print(f"session-stream: cannot read {path}: {reason}", file=stderr)
    print(f"session-stream: {report.summary(settings.input_topic)}", file=stderr)
    return 1 if report.unreadable else 0
