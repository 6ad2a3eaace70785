"""A worker recovering a state of a newer format than it reads stops at start with one line
naming both formats and exit code 4 (docs/upgrading.md), where it would otherwise read the
session as absent and clean it afresh."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgpack
import pytest
from aiokafka import AIOKafkaProducer

import stream
from stream.formats import EXIT_CODE
from stream.kafka.admin import ensure_topics
from stream.worker.app import changelog_topics
from stream.worker.codec import STATE_FORMAT
from tests.support.harness import produce, run, worker_settings
from tests.support.workload import workload

pytestmark = pytest.mark.integration


async def _write(bootstrap: str, topic: str, partition: int, key: bytes, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=key, partition=partition)
    finally:
        await producer.stop()


def test_a_state_of_a_newer_format_stops_the_worker_with_one_line(broker, tmp_path: Path) -> None:
    settings = worker_settings(broker, "future-format", tmp_path, startup_deadline=30.0)
    sessions_changelog = changelog_topics(settings)[0]
    ensure_topics(settings, changelog_topics(settings))
    future = STATE_FORMAT + 1
    run(_write(settings.bootstrap, sessions_changelog, 1, b"s-1",
               bytes([future]) + msgpack.packb([1, 1, [3]])))
    run(produce(settings, workload(20, 2, seed=1)))

    done = subprocess.run([sys.executable, "-m", "stream.cli", "worker"],
                          env=settings.environment(), capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, check=False)

    assert done.returncode == EXIT_CODE == 4, done.stderr[-3000:]
    line = (f"session-stream worker: {sessions_changelog} partition 1 holds state format "
            f"{future}, newer than session-stream {stream.__version__} reads (state format "
            f"{STATE_FORMAT}); run the version that wrote it or a later one "
            "(docs/upgrading.md)")
    refusals = [text for text in done.stderr.splitlines() if "holds state format" in text]
    assert refusals == [line]
