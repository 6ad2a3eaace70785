"""Kill the worker with SIGKILL while it works, restart it, and reconcile every input record.

CI runs a small version; `make chaos` runs the issue's size (CHAOS_ENTRIES=50000,
CHAOS_SESSIONS=2000, CHAOS_KILLS=5).
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from tests.support.harness import WorkerProcess, produce, run, worker_settings
from tests.support.outputs import wait_for_outputs
from tests.support.workload import workload

pytestmark = pytest.mark.integration

ENTRIES = int(os.environ.get("CHAOS_ENTRIES", "4000"))
SESSIONS = int(os.environ.get("CHAOS_SESSIONS", "200"))
KILLS = int(os.environ.get("CHAOS_KILLS", "2"))


def test_sigkill_at_random_moments_loses_nothing_and_doubles_nothing(broker, tmp_path: Path):
    records = workload(ENTRIES, SESSIONS)
    settings = worker_settings(broker, "crashloop", tmp_path, batch_size=200)
    rng = random.Random(11)
    log = tmp_path / "worker.log"
    worker = WorkerProcess(settings, log).start()
    try:
        run(produce(settings, records))
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.5, 3.0))
            worker.stop(signal.SIGKILL)
            worker = WorkerProcess(settings, log).start()
        wait_for_outputs(settings, records, timeout=300, workers=[worker])
    finally:
        worker.stop()


def test_graceful_stop_commits_so_nothing_is_processed_again(broker, tmp_path: Path):
    records = workload(1000, 50, seed=3)
    settings = worker_settings(broker, "graceful", tmp_path)
    half = len(records) // 2
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        run(produce(settings, records[:half]))
        deadline = time.monotonic() + 90
        while (worker.stats() or {}).get("entries_in", 0) < half and time.monotonic() < deadline:
            time.sleep(0.3)
    finally:
        assert worker.stop(signal.SIGTERM) == 0
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        run(produce(settings, records[half:]))
        wait_for_outputs(settings, records, workers=[worker])
        assert worker.stats()["entries_in"] == len(records) - half
    finally:
        worker.stop()


def test_two_workers_one_killed_mid_stream_then_restarted(broker, tmp_path: Path):
    records = workload(ENTRIES, SESSIONS, seed=9)
    settings = worker_settings(broker, "rebalance", tmp_path, batch_size=200)
    first = WorkerProcess(settings, tmp_path / "first.log").start()
    second = WorkerProcess(settings, tmp_path / "second.log").start()
    try:
        run(produce(settings, records))
        time.sleep(random.Random(5).uniform(0.5, 2.0))
        first.stop(signal.SIGKILL)
        time.sleep(3)
        first = WorkerProcess(settings, tmp_path / "first.log").start()
        wait_for_outputs(settings, records, timeout=300, workers=[first, second])
    finally:
        first.stop()
        second.stop()
