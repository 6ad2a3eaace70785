"""The processing guarantee against the real brokers: by default (auto) exactly once on Apache
Kafka, at least once on Tansu with one line at start that says why; exactly_once_v2 refuses to
start where the broker grants no transactional producer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.harness import TEST_BROKER, WorkerProcess, produce, run, worker_settings
from tests.support.outputs import wait_for_outputs
from tests.support.workload import workload

pytestmark = pytest.mark.integration



def guarantee_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "processing guarantee" in line]


def test_the_default_guarantee_is_said_in_one_line_at_start(broker, tmp_path: Path) -> None:
    settings = worker_settings(broker, "guarantee", tmp_path)
    assert settings.processing_guarantee == "auto"
    records = workload(300, 10, seed=5)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        run(produce(settings, records))
        wait_for_outputs(settings, records, workers=[worker])
        stats = worker.stats()
    finally:
        worker.stop()
    (line,) = guarantee_lines(worker.log_text())
    if TEST_BROKER == "kafka":
        assert "processing guarantee: exactly once" in line
        assert stats["processing_guarantee"] == "exactly_once_v2"
    else:
        assert "WARNING" in line and "at least once, not exactly once" in line
        assert "grants no transactional producer (it refused InitProducerId (UnknownError))" in (
            line)
        assert stats["processing_guarantee"] == "at_least_once"
        # aiokafka's own error for the refusal is not logged beside it
        assert "InitProducerIdRequest" not in worker.log_text()


@pytest.mark.skipif(TEST_BROKER == "kafka",
                    reason="Apache Kafka grants transactional producers; the Tansu suite runs "
                    "this refusal")
def test_exactly_once_v2_refuses_to_start_without_transactions(broker, tmp_path: Path) -> None:
    settings = worker_settings(broker, "refused", tmp_path,
                               processing_guarantee="exactly_once_v2")
    done = subprocess.run([sys.executable, "-m", "stream.cli", "worker"],
                          env=settings.environment(), capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 1
    assert ("session-stream worker: --processing-guarantee exactly_once_v2, but the broker at "
            f"{settings.bootstrap} grants no transactional producer: it refused InitProducerId "
            "(UnknownError)") in done.stderr
