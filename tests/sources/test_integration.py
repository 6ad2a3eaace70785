"""Both sources against a real broker: what lands on the topic, byte for byte, once each."""

from __future__ import annotations

import argparse
import asyncio
import io
import shutil
import sqlite3
import statistics
import time
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import pytest
from aiokafka import AIOKafkaProducer

from stream.brokers import RunningBroker
from stream.commands import follow, follow_sqlite
from stream.consumers.tail import read_topic
from stream.kafka.admin import create_topics
from stream.kafka.producer import make_producer, send_records
from stream.settings import Settings
from stream.sources.publish import start_source_producer
from stream.sources.session_files import open_lines
from tests.support.data import FIXTURES
from tests.support.sources import append, entry, header, lines
from tests.support.sqlite_store import create_store, insert

pytestmark = pytest.mark.integration


def run_command(module: ModuleType, argv: list[str]) -> str:
    """Runs the command like the CLI would; returns its standard error, failing on exit 1."""
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    stderr = io.StringIO()
    assert module.main(parser.parse_args(argv), stderr=stderr) == 0, stderr.getvalue()
    return stderr.getvalue()


def topic_contents(broker: RunningBroker, topic: str) -> dict[bytes, list[bytes]]:
    """Per key, the values in offset order; asserts each key kept to one partition."""
    settings = Settings.load(None, {"SESSION_STREAM_BROKER": broker.url})
    values: dict[bytes, list[bytes]] = defaultdict(list)
    partitions: dict[bytes, set[int]] = defaultdict(set)

    async def read() -> None:
        async for record in read_topic(settings, topic, follow=False):
            values[record.key].append(record.value)
            partitions[record.key].add(record.partition)

    asyncio.run(read())
    assert all(len(used) == 1 for used in partitions.values())
    return dict(values)


def test_follow_publishes_every_line_once_across_restarts(
    broker: RunningBroker, tmp_path: Path
) -> None:
    topic = "follow-events"
    root = tmp_path / "state"
    sessions = root / "agents" / "main" / "sessions"
    shutil.copytree(FIXTURES, sessions)
    (sessions / "SOURCES.md").unlink()
    expected = {
        p.name.split(".jsonl")[0].encode(): [body for _, body in open_lines(p)]
        for p in sessions.iterdir()
        if ".checkpoint." not in p.name and p.name != "sessions.json"
    }
    live, other = sessions / "live-1.jsonl", sessions / "live-2.jsonl"
    live.write_bytes(header("live-1") + entry("a-1"))
    argv = [str(root), "--once", "--checkpoint", str(tmp_path / "follow.json")]
    argv += ["--broker", broker.url, "--input-topic", topic, "--partitions", "4"]

    first_run = sum(map(len, expected.values())) + 2
    assert f"published {first_run} records" in run_command(follow, argv)
    # Between runs: lines appended (the last one partial), a reset rename, a new session.
    append(live, entry("a-2"), entry("a-3")[:9])
    other.write_bytes(header("live-2") + entry("b-1"))
    plain = sessions / "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d.jsonl"
    plain.rename(plain.with_name(plain.name + ".reset.2026-04-05T04-22-28.629Z"))
    run_command(follow, argv)
    append(live, entry("a-3")[9:])
    append(other, entry("b-2"))
    run_command(follow, argv)

    assert "published 0 records" in run_command(follow, argv)
    expected[b"live-1"] = lines(header("live-1"), entry("a-1"), entry("a-2"), entry("a-3"))
    expected[b"live-2"] = lines(header("live-2"), entry("b-1"), entry("b-2"))
    assert topic_contents(broker, topic) == expected


def test_follow_sqlite_publishes_every_event_once_across_restarts(
    broker: RunningBroker, tmp_path: Path
) -> None:
    topic = "follow-sqlite-events"
    database = tmp_path / "openclaw-agent.sqlite"
    writer = create_store(database)
    expected: dict[bytes, list[bytes]] = defaultdict(list)
    expected[b"s-a"] += insert(writer, "s-a", 1, 2, 3, 4, 5)
    expected[b"s-b"] += insert(writer, "s-b", 1, 2)
    argv = [str(database), "--once", "--page-size", "2"]
    argv += ["--checkpoint", str(tmp_path / "sqlite.json")]
    argv += ["--broker", broker.url, "--input-topic", topic, "--partitions", "4"]

    assert "published 7 records" in run_command(follow_sqlite, argv)
    expected[b"s-a"] += insert(writer, "s-a", 6)
    expected[b"s-c"] += insert(writer, "s-c", 1, 2, 3)
    # A second writer holds a write transaction through the next run.
    second = sqlite3.connect(database, isolation_level=None)
    second.execute("BEGIN IMMEDIATE")
    pending = insert(second, "s-b", 3)
    assert "published 4 records" in run_command(follow_sqlite, argv)
    second.execute("COMMIT")
    expected[b"s-b"] += pending
    assert "published 1 records" in run_command(follow_sqlite, argv)

    assert "published 0 records" in run_command(follow_sqlite, argv)
    assert topic_contents(broker, topic) == dict(expected)
    second.close()
    writer.close()


def test_a_live_sources_round_is_acknowledged_without_waiting_for_a_linger(
    broker: RunningBroker,
) -> None:
    """A round's records go out as soon as they are appended; the default producer (the
    near miss) holds each round's open batch for its 10 ms linger first."""
    topic = "round-acks"
    create_topics(broker.bootstrap, [topic], partitions=4)
    settings = Settings.load(None, {"SESSION_STREAM_BROKER": broker.url})

    async def round_trips(producer: AIOKafkaProducer) -> list[float]:
        try:
            times = []
            for number in range(20):
                started = time.monotonic()
                await send_records(producer, topic, [(b"s-%d" % number, b"row")])
                times.append(time.monotonic() - started)
            return times
        finally:
            await producer.stop()

    async def both() -> tuple[list[float], list[float]]:
        lingering = make_producer(settings)
        await lingering.start()
        return (await round_trips(await start_source_producer(settings)),
                await round_trips(lingering))

    source, lingering = asyncio.run(both())

    assert min(lingering) >= 0.009
    assert statistics.median(source) < 0.008
