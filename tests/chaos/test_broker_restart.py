"""SIGKILL the Apache Kafka broker mid-stream and start it again on the same data, while a
worker, a `follow` source and the memory writer run; then reconcile everything.

Real corpus sessions with injected duplicates (tests/support/workload.py) are written line by
line into a session folder that `follow` watches; the broker is killed while lines are still
being written and processed, stays away BROKER_DOWN_S seconds, and comes back on the same
port and files. The policy under test is stream.kafka.retry: no process exits because the
broker went away, each goes on by itself when it is back, and what was sent twice is the same
bytes. As a supervisor would, the test restarts a worker that exits with the documented
restart code (3); the follow source and the memory writer must never exit.

Kafka only: Tansu keeps everything in memory, so a restarted Tansu has no topics, offsets or
groups left. CI size by default; `make chaos` runs it at its size (CHAOS_ENTRIES lines over
CHAOS_SESSIONS sessions), BROKER_CHAOS_* override both.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from stream.brokers import RunningBroker, start_kafka
from stream.brokers.local import stop_process
from stream.consumers.memory_writer.compare import duplicate_lines
from stream.consumers.memory_writer.files import MemoryWriter
from stream.settings import Settings
from tests.support.harness import (
    WorkerProcess,
    consume_all,
    kafka_only,
    run,
    wait_until,
    worker_settings,
)
from tests.support.outputs import (
    difference,
    first_occurrences,
    offline_results,
    per_session,
    without_source,
)
from tests.support.workload import corpus_sessions, session_with_duplicates

# `make chaos` sets CHAOS_ENTRIES and CHAOS_SESSIONS for every chaos test
LINES = int(os.environ.get("BROKER_CHAOS_LINES", os.environ.get("CHAOS_ENTRIES", "3000")))
SESSIONS = int(os.environ.get("BROKER_CHAOS_SESSIONS", os.environ.get("CHAOS_SESSIONS", "48")))
WRITE_SECONDS = float(os.environ.get("BROKER_CHAOS_WRITE_SECONDS", "30"))
BROKER_DOWN_S = float(os.environ.get("BROKER_CHAOS_DOWN_SECONDS", "10"))
KILL_AFTER_S = 6.0  # into the writing
# Small batches: more deliveries under way when the broker dies.
BATCH_SIZE = 20
# Shorter than the outage: a worker that takes the broker's absence for a stall would exit.
STALL_TIMEOUT = 15.0

pytestmark = kafka_only(
    "Tansu keeps everything in memory: restarted, it has no topics, offsets or "
    "groups left, so there is nothing to come back to; the Kafka suite runs this test"
)


@pytest.fixture
def own_kafka() -> Iterator[RunningBroker]:
    """A broker of this test's own: it is killed, and the session's broker serves others."""
    broker = start_kafka()
    try:
        yield broker
    finally:
        broker.stop()


class Command:
    """A `session-stream` subprocess with its own log, as a supervisor runs it."""

    def __init__(self, settings: Settings, log_path: Path, *args: str) -> None:
        self.args, self.log_path = args, log_path
        self.env = settings.environment()
        self.process = self._start()

    def _start(self) -> subprocess.Popen:
        with self.log_path.open("ab") as log:
            return subprocess.Popen([sys.executable, "-m", "stream.cli", *self.args],
                                    env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                    cwd=self.log_path.parent)

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> int:
        return stop_process(self.process)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])


def session_files(lines: int, sessions: int, seed: int = 13) -> list[list[bytes]]:
    """Per session file, its lines: corpus sessions with harness duplicates injected, cut to
    an equal share of `lines`. A corpus session used again gets a new id in its header, so
    that every file is a session of its own."""
    rng = random.Random(seed)
    corpus = [s for s in corpus_sessions() if len(s) >= 5]
    share = max(5, lines // sessions)
    files = []
    for n in range(sessions):
        source = corpus[n % len(corpus)]
        if n >= len(corpus):
            header = orjson.loads(source[0])
            header["id"] = f"{header['id']}-{n}"
            source = [orjson.dumps(header), *source[1:]]
        files.append(session_with_duplicates(source, f"b{n}", rng)[:share])
    return files


class Writer(threading.Thread):
    """Appends the sessions' lines to their files, one line at a time across the sessions, at
    a pace that spreads them over `seconds`; `burst(n)` writes the next n lines at once."""

    def __init__(self, folder: Path, files: list[list[bytes]], seconds: float) -> None:
        super().__init__(daemon=True)
        self.folder, self.files = folder, files
        self.pause = seconds / max(1, sum(map(len, files)))
        self.written = 0
        self.error: BaseException | None = None
        self._burst = 0

    def burst(self, lines: int) -> None:
        self._burst = lines

    def run(self) -> None:
        try:
            handles = [(self.folder / f"b{n}.jsonl").open("ab") for n in range(len(self.files))]
            order = [n for n, lines in enumerate(self.files) for _ in lines]
            random.Random(3).shuffle(order)
            positions = [0] * len(self.files)
            for n in order:
                handles[n].write(self.files[n][positions[n]] + b"\n")
                handles[n].flush()
                positions[n] += 1
                self.written += 1
                if self._burst > 0:
                    self._burst -= 1
                else:
                    time.sleep(self.pause)
            for handle in handles:
                handle.close()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error


def session_ids(files: list[list[bytes]]) -> list[str]:
    return [orjson.loads(lines[0])["id"] for lines in files]


def is_subsequence(wanted: list[bytes], got: list[bytes]) -> bool:
    remaining = iter(got)
    return all(any(value == line for value in remaining) for line in wanted)


def expected_memory(kept: dict[str, list[bytes]], folder: Path) -> dict[str, bytes]:
    """The memory files the writer makes from the offline clean output."""
    writer = MemoryWriter(folder)
    writer.write((sid, raw) for sid, lines in kept.items() for raw in lines)
    return memory_files(folder)


def memory_files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.glob("*.md"))}


class Scenario:
    """The processes of one run, started as a deployment would, and what they produced."""

    def __init__(self, broker: RunningBroker, tmp_path: Path) -> None:
        self.settings = worker_settings(broker, "brokerkill", tmp_path, batch_size=BATCH_SIZE,
                                        stall_timeout=STALL_TIMEOUT)
        self.folder = tmp_path / "sessions"
        self.folder.mkdir()
        self.memory_dir = tmp_path / "memory"
        self.worker = WorkerProcess(self.settings, tmp_path / "worker.log").start()
        self.source = Command(self.settings, tmp_path / "follow.log", "follow",
                              str(self.folder), "--checkpoint",
                              str(tmp_path / "follow.checkpoint.json"), "--poll-interval", "0.2")
        self.memory_writer = Command(self.settings, tmp_path / "memory-writer.log",
                                     "memory-writer", "--out", str(self.memory_dir))
        self.worker_restarts = 0

    def processed(self) -> int:
        return (self.worker.stats() or {}).get("entries_in", 0)

    def supervise(self) -> None:
        """What a supervisor does: start a worker again that exited for a restart (code 3)."""
        if self.worker.process.poll() is not None:
            assert self.worker.process.returncode == 3, self.worker.log_tail()
            self.worker_restarts += 1
            self.worker.start()

    def read(self) -> dict:
        settings = self.settings
        alerts = run(consume_all(settings, settings.alerts_topic))
        return {
            "inputs": per_session(run(consume_all(settings, settings.input_topic))),
            "kept": {sid: first_occurrences(values) for sid, values in
                     per_session(run(consume_all(settings, settings.clean_topic))).items()},
            "alerts": [orjson.loads(record.value) for record in alerts],
            "memory": memory_files(self.memory_dir),
        }

    def stop(self) -> None:
        for command in (self.source, self.memory_writer):
            command.stop()
        self.worker.stop()


@dataclass
class Expected:
    """What the offline tools make of the session files: the reference of the reconciliation."""

    ids: list[str]
    files: list[list[bytes]]
    kept: dict[str, list[bytes]]
    alerts: set[bytes]
    memory_dir: Path
    memory: dict[str, bytes]

    @classmethod
    def of(cls, files: list[list[bytes]], memory_dir: Path) -> Expected:
        ids = session_ids(files)
        assert len(set(ids)) == len(ids)
        records = [(sid.encode(), line) for sid, lines in zip(ids, files, strict=True)
                   for line in lines]
        kept, alerts = offline_results(records)
        return cls(ids, files, dict(kept), {without_source(a) for a in alerts}, memory_dir,
                   expected_memory(kept, memory_dir))

    @property
    def lines(self) -> int:
        return sum(map(len, self.files))

    def reached(self, latest: dict) -> bool:
        return (latest["kept"] == self.kept and latest["memory"] == self.memory
                and {without_source(a) for a in latest["alerts"]} >= self.alerts)


def assert_reconciled(latest: dict, expected: Expected, memory_dir: Path) -> None:
    # 1. Every line reached the input topic, in order; what is there twice is a resend of the
    # same bytes, after the original.
    for sid, lines in zip(expected.ids, expected.files, strict=True):
        got = latest["inputs"].get(sid, [])
        assert is_subsequence(lines, got), f"{sid}: lines missing from the input topic"
        assert first_occurrences(got) == first_occurrences(lines), f"{sid}: out of order"
    # 2. The clean topic's first occurrences are the offline `clean` of the same files.
    assert latest["kept"] == expected.kept, difference(latest["kept"], expected.kept)
    # 3. Every alert of the offline run is there, and no alert id has two variants.
    assert {without_source(a) for a in latest["alerts"]} >= expected.alerts
    variants = defaultdict(set)
    for alert in latest["alerts"]:
        variants[alert["id"]].add(without_source(alert))
    assert all(len(v) == 1 for v in variants.values())
    # 4. The memory files are what the writer makes of the offline clean output: no line
    # lost, none doubled.
    assert latest["memory"] == expected.memory
    assert duplicate_lines(memory_dir) == duplicate_lines(expected.memory_dir)


def test_broker_sigkilled_mid_stream_and_restarted(own_kafka: RunningBroker, tmp_path: Path):
    started = time.monotonic()
    expected = Expected.of(session_files(LINES, SESSIONS), tmp_path / "expected-memory")
    scenario = Scenario(own_kafka, tmp_path)
    writer = Writer(scenario.folder, expected.files, WRITE_SECONDS)
    latest: dict = {}

    def reconciled() -> bool:
        scenario.supervise()
        latest.update(scenario.read())
        return expected.reached(latest)

    try:
        writer.start()
        time.sleep(KILL_AFTER_S)
        # A burst of lines, and the kill once the worker is into it: records are in the
        # broker that the worker has not processed, some in its hands, some on their way.
        before_burst = scenario.processed()
        writer.burst(expected.lines // 4)
        wait_until(lambda: scenario.processed() > before_burst + BATCH_SIZE, 30, "the burst")
        before_kill = scenario.processed()
        own_kafka.kill()
        killed_at = time.monotonic()
        time.sleep(BROKER_DOWN_S)
        own_kafka.restart()
        back_after = time.monotonic() - killed_at
        writer.join(WRITE_SECONDS * 3)
        assert not writer.is_alive() and writer.error is None, writer.error
        assert writer.written == expected.lines
        with contextlib.suppress(TimeoutError):  # the assertions below say what differs
            wait_until(reconciled, 240, "the outputs of every line")
        # Every process is still at work: none exited because the broker went away.
        assert scenario.source.running(), scenario.source.log_tail()
        assert scenario.memory_writer.running(), scenario.memory_writer.log_tail()
        scenario.supervise()
        assert scenario.worker_restarts == 0, scenario.worker.log_tail()
    finally:
        scenario.stop()

    print(f"\n{expected.lines} lines in {len(expected.files)} sessions; broker killed with "
          f"{before_kill} processed, back after {back_after:.0f}s; "
          f"{time.monotonic() - started:.0f}s in all")
    assert 0 < before_kill < expected.lines, "the kill was not mid-stream"
    assert_reconciled(latest, expected, scenario.memory_dir)
