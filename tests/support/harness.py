"""Run real worker processes against the test broker and read what they produced."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import CoordinatorLoadInProgressError, GroupCoordinatorNotAvailableError

from stream.brokers import RunningBroker, free_port
from stream.brokers.local import stop_process
from stream.consumers.tail import read_topic
from stream.settings import Settings
from stream.worker.stalls import STALLED_EXIT_CODE

# The broker the integration tests run against: Tansu (`make test`) or Apache Kafka
# (`make test-kafka`, SESSION_STREAM_TEST_BROKER=kafka).
TEST_BROKER = os.environ.get("SESSION_STREAM_TEST_BROKER", "tansu")


def kafka_only(reason: str) -> list[pytest.MarkDecorator]:
    """The marks of an integration test that runs on Apache Kafka only, saying why."""
    return [pytest.mark.integration, pytest.mark.skipif(TEST_BROKER != "kafka", reason=reason)]


def worker_settings(broker: RunningBroker, name: str, tmp_path: Path, **changes) -> Settings:
    """Settings with topics and a consumer group of this test's own."""
    base = Settings.load(environ={})
    return base.replace(
        broker=broker.url,
        app_id=f"ss-{name}",
        input_topic=f"{name}-events",
        clean_topic=f"{name}-clean",
        alerts_topic=f"{name}-alerts",
        dlq_topic=f"{name}-dlq",
        data_dir=str(tmp_path / "data"),
        **{"partitions": 4, "stall_timeout": 20.0, **changes},
    )


@dataclass
class WorkerProcess:
    settings: Settings
    log_path: Path
    web_port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None
    _log_start: int = 0

    def start(self, *, wait: bool = True) -> WorkerProcess:
        """Start the worker; with `wait`, until it is ready (Faust's "Worker ready")."""
        self.web_port = free_port()
        # a restart appends to the same log: only what this process writes counts as ready
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "stream.cli", "worker"],
            env=self.settings.replace(web_port=self.web_port).environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.log_path.parent,
        )
        if wait:
            self.wait_ready()
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def send(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def restart_if_stalled(self) -> None:
        """What a supervisor does with a worker that exited for a restart (code 3)."""
        if self.process is not None and self.process.poll() == STALLED_EXIT_CODE:
            self.start()

    def get(self, path: str) -> bytes | None:
        """The body of one of the worker's web pages; None when it does not answer 200."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}{path}", timeout=2) as r:
                return r.read()
        except OSError:
            return None

    def stats(self) -> dict | None:
        body = self.get("/stats")
        return json.loads(body) if body is not None else None

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited {self.process.returncode}:\n{self.log_tail()}")
            if self.stats() is not None and b"Worker ready" in self._own_log():
                return
            time.sleep(0.3)
        raise TimeoutError(f"worker not ready after {timeout}s:\n{self.log_tail()}")

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 30.0) -> int:
        assert self.process is not None
        return stop_process(self.process, sig, timeout)

    def _own_log(self) -> bytes:
        with self.log_path.open("rb") as log:
            log.seek(self._log_start)
            return log.read()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise TimeoutError(f"timed out waiting for {what}")


async def produce(settings: Settings, records: Iterable[tuple[bytes | None, bytes | None]]) -> int:
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        pending = [await producer.send(settings.input_topic, v, key=k) for k, v in records]
        await asyncio.gather(*pending)
        return len(pending)
    finally:
        await producer.stop()


async def group_offsets(settings: Settings) -> dict[int, int]:
    """The offsets the worker's group has committed, per input partition (one with none is
    left out; none while the broker has no coordinator for the group yet)."""
    partitions = [TopicPartition(settings.input_topic, p) for p in range(settings.partitions)]
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        # with its partitions named: Tansu drops the connection otherwise
        offsets = await admin.list_consumer_group_offsets(settings.app_id, partitions=partitions)
    except (GroupCoordinatorNotAvailableError, CoordinatorLoadInProgressError):
        return {}
    finally:
        await admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if meta.offset >= 0}


async def consume_all(settings: Settings, topic: str) -> list:
    """Every record of the topic up to its end now, partition by partition."""
    return [record async for record in read_topic(settings, topic, follow=False)]


def run(coro):
    return asyncio.run(coro)

