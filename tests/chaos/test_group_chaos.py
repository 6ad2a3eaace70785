"""Chaos in the worker's consumer group, drawn at random: a fresh group, kills before, during
and after its partitions' first commits while input flows, a worker stalled past its session
timeout and resumed, a worker joining mid-stream, and graceful restarts with records waiting.

After each run, every input entry is kept, dropped with an alert, or dead-lettered, exactly as
the offline `clean` of the same records decides (docs/reliability.md): the clean topic's first
occurrences equal its output, no entry is dropped that it keeps, and every one of its alerts
is on the alert topic.

The schedule of a run is drawn from a seed that every failure names: CHAOS_SEED=N replays it,
and CHAOS_RUNS=N draws N schedules (`make chaos` draws more, larger).

The group runs on an Apache Kafka of its own with Kafka's default group settings (a new
group's first rebalance waits 3 s for more members, which the session broker's tests skip):
the loss these tests were written for needed that window to show.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import TopicPartition

from stream.brokers import RunningBroker, start_broker, start_kafka
from stream.kafka.admin import ensure_topics
from stream.kafka.configuration import client_options
from stream.kafka.ends import log_end_offsets
from stream.settings import Settings
from stream.worker.app import changelog_topics
from tests.support.harness import (
    TEST_BROKER,
    WorkerProcess,
    consume_all,
    group_offsets,
    produce,
    run,
    wait_until,
    worker_settings,
)
from tests.support.outputs import wait_for_outputs
from tests.support.workload import workload

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("CHAOS_SEED", str(random.SystemRandom().randrange(10**6))))
RUNS = int(os.environ.get("CHAOS_RUNS", "1"))
ENTRIES = int(os.environ.get("CHAOS_ENTRIES", "5000"))
SESSIONS = int(os.environ.get("CHAOS_SESSIONS", "200"))
ROUNDS = 10  # the input arrives in this many rounds, one a second, while the chaos runs
SLICES = 8  # graceful restarts: a worker per slice of the input
RESTART_ENTRIES = 24_000


@pytest.fixture(scope="module")
def group_broker() -> Iterator[RunningBroker]:
    """Kafka with its default group settings; Tansu as the session's tests run it."""
    if TEST_BROKER == "kafka":
        broker = start_kafka(properties={"group.initial.rebalance.delay.ms": "3000"})
    else:
        broker = start_broker(TEST_BROKER)
    try:
        yield broker
    finally:
        broker.stop()


def committed_everything(settings: Settings) -> bool:
    ends = run(log_end_offsets(client_options(settings), [
        TopicPartition(settings.input_topic, p) for p in range(settings.partitions)]))
    committed = run(group_offsets(settings))
    return all(committed.get(tp.partition, 0) >= end for tp, end in ends.items())


def slice_done(worker: WorkerProcess, size: int, settings: Settings) -> bool:
    return (worker.stats() or {}).get("entries_in", 0) >= size and committed_everything(settings)


def test_a_graceful_restart_processes_each_waiting_record_once(group_broker, tmp_path: Path):
    """The input arrives in slices, each while no worker runs; a worker starts for it and is
    stopped with SIGTERM once its group has committed everything. Each worker processes its
    slice once: nothing it finds waiting is fed to it twice."""
    records = workload(RESTART_ENTRIES, 200, seed=SEED)
    settings = worker_settings(group_broker, f"restarts{SEED}", tmp_path, batch_size=200)
    ensure_topics(settings, changelog_topics(settings))
    size = len(records)
    slices = [records[n * size // SLICES:(n + 1) * size // SLICES] for n in range(SLICES)]
    log = tmp_path / "worker.log"
    processed = []
    for part in slices:
        run(produce(settings, part))
        worker = WorkerProcess(settings, log).start()
        try:
            wait_until(lambda: slice_done(worker, len(part), settings),  # noqa: B023
                       120, "the slice committed")
            processed.append(worker.stats()["entries_in"])
        finally:
            assert worker.stop(signal.SIGTERM) == 0
    assert processed == [len(part) for part in slices], f"seed {SEED}"
    kept, _alerts, _dlq = wait_for_outputs(settings, records)
    clean = run(consume_all(settings, settings.clean_topic))
    assert len(clean) == sum(map(len, kept.values())), "a kept entry is on the clean topic twice"


class Chaos:
    """The workers of one run and the events drawn for it."""

    def __init__(self, settings: Settings, tmp_path: Path, rng: random.Random) -> None:
        self._started = time.monotonic()
        self.settings, self.tmp_path, self.rng = settings, tmp_path, rng
        self.workers = [self._worker(n) for n in range(2)]
        self.events: list[str] = []

    def _worker(self, n: int) -> WorkerProcess:
        return WorkerProcess(self.settings, self.tmp_path / f"worker-{n}.log").start(wait=False)

    def _note(self, what: str) -> None:
        self.events.append(f"{time.monotonic() - self._started:5.1f}s {what}")

    def kill_one(self, when: str) -> None:
        """SIGKILL a worker drawn at random and start it again at once."""
        worker = self.rng.choice(self.workers)
        self._note(f"SIGKILL {worker.log_path.stem} ({when})")
        worker.send(signal.SIGKILL)
        worker.process.wait()
        worker.start(wait=False)

    def stall_one(self) -> None:
        """SIGSTOP a worker past its session timeout, then SIGCONT it."""
        worker = self.rng.choice(self.workers)
        pause = self.settings.session_timeout + self.rng.uniform(2.0, 5.0)
        self._note(f"SIGSTOP {worker.log_path.stem} for {pause:.1f}s")
        worker.send(signal.SIGSTOP)
        time.sleep(pause)
        worker.send(signal.SIGCONT)

    def join_one(self) -> None:
        self._note("a third worker joins")
        self.workers.append(self._worker(len(self.workers)))

    def committed(self) -> int:
        """How many input partitions have a committed offset."""
        return len(run(group_offsets(self.settings)))

    def wait_for(self, predicate, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not predicate():
            time.sleep(0.2)

    def play(self) -> None:
        self._started = time.monotonic()
        # Before any first commit, while the group forms its first generation: a killed
        # worker's member holds its partitions until its session times out, and a stalled
        # one holds up the whole generation, so input piles up for whoever takes them over.
        early: list = [lambda: self.kill_one("before the first commits")
                       for _ in range(self.rng.randint(1, 3))]
        later: list = [self.during_first_commits, self.after_first_commits, self.join_one,
                       lambda: self.kill_one("mid-stream")]
        (early if self.rng.random() < 0.5 else later).append(self.stall_one)
        self.rng.shuffle(early)
        self.rng.shuffle(later)
        for event in early:
            time.sleep(self.rng.uniform(0.3, 3.0))
            event()
        for event in later:
            time.sleep(self.rng.uniform(0.2, 2.0))
            event()

    def during_first_commits(self) -> None:
        self.wait_for(lambda: self.committed() >= 1, 15)
        self.kill_one(f"{self.committed()} of {self.settings.partitions} partitions committed")

    def after_first_commits(self) -> None:
        self.wait_for(lambda: self.committed() == self.settings.partitions, 20)
        self.kill_one(f"{self.committed()} of {self.settings.partitions} partitions committed")

    def stop(self) -> None:
        for worker in self.workers:
            if worker.running():
                worker.send(signal.SIGCONT)
                worker.stop()


@pytest.mark.parametrize("number", range(RUNS))
def test_a_fresh_group_under_random_chaos_loses_nothing(group_broker, tmp_path: Path,
                                                       number: int):
    seed = SEED + number
    rng = random.Random(seed)
    records = workload(ENTRIES, SESSIONS, seed=seed)
    settings = worker_settings(group_broker, f"fresh{seed}", tmp_path, batch_size=200)
    ensure_topics(settings, changelog_topics(settings))
    rounds = [records[n * len(records) // ROUNDS:(n + 1) * len(records) // ROUNDS]
              for n in range(ROUNDS)]

    def feed() -> None:
        for part in rounds:
            run(produce(settings, part))
            time.sleep(1.0)

    feeder = threading.Thread(target=feed, daemon=True)
    chaos = Chaos(settings, tmp_path, rng)
    try:
        feeder.start()
        chaos.play()
        feeder.join(120)
        assert not feeder.is_alive()
        wait_for_outputs(settings, records, timeout=240, workers=chaos.workers)
    except (AssertionError, TimeoutError) as error:
        events = "\n".join(chaos.events)
        raise AssertionError(f"seed {seed} (CHAOS_SEED={seed} replays it):\n{events}\n"
                             f"{error}") from error
    finally:
        chaos.stop()
