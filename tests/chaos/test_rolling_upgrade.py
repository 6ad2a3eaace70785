"""A rolling upgrade from state format 1 (0.1.0), 2 (0.2.0) and 3 (0.3.0) on a real
broker: workers of the last commit that wrote the format process the first part of a stream,
then are replaced one by one by this version while input continues, in the two rounds
docs/upgrading.md prescribes (first `--upgrade-from <release>`, then without), partitions moving
between old and new workers, and the first part sent again after the upgrade (redeliveries
across the change). The clean topic must equal the offline clean of the whole input, the alerts
an uninterrupted run's, nothing lost or doubled (wait_for_outputs).

The old workers run that commit's source (`git archive` of it into a temporary folder) on this
virtualenv, uncompiled; its dependencies are this version's. The commit must be in the clone's
history: .ci/run's clone (a `git clone` of a local path) has it, a shallow clone does not, and
then the test is skipped saying so.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from stream.kafka.admin import ensure_topics
from stream.worker import codec
from stream.worker.app import changelog_topics
from tests.support import old_release
from tests.support.harness import WorkerProcess, consume_all, produce, run, worker_settings
from tests.support.outputs import wait_for_outputs
from tests.support.workload import workload

pytestmark = pytest.mark.integration

# Each release upgraded from: the last commit that wrote its state format, and that format.
RELEASES = {"0.1": ("a76737c", 1), "0.2": ("29b7df1", 2), "0.3": ("2825abc", 3)}


def _produce_slowly(settings, records, chunks: int = 10) -> threading.Thread:
    """Input that keeps coming while workers are replaced."""
    size = max(1, len(records) // chunks)

    def send() -> None:
        for start in range(0, len(records), size):
            run(produce(settings, records[start:start + size]))
            time.sleep(1.0)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("release", RELEASES)
def test_a_rolling_upgrade_loses_and_doubles_nothing(
        broker, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, release: str) -> None:
    commit, old_format = RELEASES[release]
    old_tree = old_release.source_tree(commit, f"the last that wrote state format {old_format}",
                                       tmp_path_factory)
    records = workload(1200, 40, seed=26)
    first, second, third = records[:400], records[400:800], records[800:]
    again = first[:150]  # sent again once every worker is new: redeliveries across the upgrade
    settings = worker_settings(broker, f"rolling-upgrade-{release}", tmp_path, batch_size=50,
                               session_timeout=6.0)
    upgrading = settings.replace(upgrade_from=release)

    def worker(name: str, version_settings, tree: Path | None = None) -> WorkerProcess:
        # `python -m` imports `stream` from the working folder first: the log's folder
        folder = tree if tree is not None else tmp_path
        return WorkerProcess(version_settings.replace(data_dir=str(tmp_path / f"data-{name}")),
                             folder / f"{name}.log").start()

    ensure_topics(settings, changelog_topics(settings))
    run(produce(settings, first))
    old = [worker("old-a", settings, old_tree), worker("old-b", settings, old_tree)]
    running = list(old)
    try:
        wait_for_outputs(settings, first, timeout=90, workers=running)
        # Round 1: each old worker in turn replaced by one writing the old format, input
        # flowing.
        feeding = _produce_slowly(settings, second)
        for number, previous in enumerate(old):
            previous.stop()
            running.remove(previous)
            running.append(worker(f"upgrading-{number}", upgrading))
        feeding.join()
        # Round 2: every worker is new; each restarted writing the current format.
        feeding = _produce_slowly(settings, third + again)
        for number, previous in enumerate(list(running)):
            previous.stop()
            running.remove(previous)
            running.append(worker(f"new-{number}", settings))
        feeding.join()

        wait_for_outputs(settings, first + second + third + again, timeout=120, workers=running)
    finally:
        for process in running:
            process.stop()
    for log in (old_tree / "old-a.log", tmp_path / "new-0.log"):
        assert "unreadable state" not in log.read_text(errors="replace")
    # both formats were written: the old one by the old and the upgrading workers, then 3
    written = run(consume_all(settings, changelog_topics(settings)[0]))
    formats = [codec.format_of(record.value) for record in written if record.value]
    assert set(formats) == {old_format, codec.STATE_FORMAT}
