"""The streaming worker against a real broker: the same results as `clean`, kept across restarts."""

from __future__ import annotations

import signal
from pathlib import Path

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient

from stream.engine import DROP_RULES
from tests.support.harness import (
    WorkerProcess,
    produce,
    run,
    wait_until,
    worker_settings,
)
from tests.support.outputs import wait_for_outputs
from tests.support.sessions import keyed_lines, write_sessions

pytestmark = pytest.mark.integration
















def test_worker_gives_the_offline_results(broker, tmp_path: Path) -> None:
    paths = write_sessions(tmp_path / "sessions")
    settings = worker_settings(broker, "agree", tmp_path)
    records = keyed_lines(paths)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        run(produce(settings, records))
        kept, alerts, dlq = wait_for_outputs(settings, records, workers=[worker])
        stats = worker.stats()
        metrics = worker.get("/metrics").decode()
        assert worker.get("/table/sessions") is None  # no table browsing on the web
    finally:
        worker.stop()
    for alert in alerts:
        assert alert["source"]["topic"] == settings.input_topic
    # Per-session order on the clean topic is the input order (checked by equality above),
    # and every input record is accounted for: kept, dropped with an alert, or dead-lettered.
    drops = [a for a in alerts if a["action"] == "dropped" and a["kind"] in DROP_RULES]
    assert sum(map(len, kept.values())) + len(drops) + len(dlq) == len(records)
    assert stats["entries_in"] == len(records)
    assert stats["entries_in"] == stats["kept"] + stats["dropped"] + stats["dead_lettered"]
    assert len(dlq) == 3
    letter = orjson.loads(dlq[0].value)
    assert letter["session_id"] == "bad-lines" and letter["reason"].startswith("not JSON")
    assert dict(dlq[0].headers)["reason"].decode() == letter["reason"]
    assert f'session_stream_records_total{{outcome="in"}} {len(records)}.0' in metrics
    assert 'session_stream_dropped_total{rule="cli_mirror_duplicate"} 30.0' in metrics
    assert f'session_stream_output_records_total{{topic="{settings.dlq_topic}"}} 3.0' in metrics
    assert "session_stream_batch_seconds_count" in metrics
    assert "session_stream_record_latency_seconds_bucket" in metrics
    lags = [line for line in metrics.splitlines()
            if line.startswith("session_stream_consumer_lag{")]
    assert len(lags) == settings.partitions and all(line.endswith(" 0.0") for line in lags)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])
def test_restart_recovers_state(broker, tmp_path: Path, stop_signal) -> None:
    """A duplicate whose original was processed before the restart is still dropped after it,
    and nothing is lost."""
    paths = write_sessions(tmp_path / "sessions")
    settings = worker_settings(broker, f"restart-{stop_signal.name.lower()}", tmp_path)
    records = keyed_lines(paths)
    half = len(records) // 2
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        run(produce(settings, records[:half]))
        wait_until(lambda: (worker.stats() or {}).get("entries_in") == half, 90, "first half")
    finally:
        worker.stop(stop_signal)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        # The first half again (a producer retry), then the rest.
        again = records[:half] + records[half:]
        run(produce(settings, again))
        _, alerts, _ = wait_for_outputs(settings, records[:half] + again, workers=[worker])
    finally:
        worker.stop()
    redelivered = {a["entry_id"] for a in alerts if a["kind"] == "redelivery"}
    first_half_ids = {orjson.loads(raw).get("id") for _, raw in records[:half] if raw[:1] == b"{"}
    assert redelivered >= {i for i in first_half_ids if isinstance(i, str)} - {"ok1"}


def test_two_workers_split_partitions_and_one_finishes_alone(broker, tmp_path: Path) -> None:
    paths = write_sessions(tmp_path / "sessions")
    settings = worker_settings(broker, "pair", tmp_path)
    records = keyed_lines(paths)
    half = len(records) // 2
    first = WorkerProcess(settings, tmp_path / "first.log").start()
    second = WorkerProcess(settings, tmp_path / "second.log").start()
    try:
        wait_until(lambda: _assigned(first) and _assigned(second)
                   and len(_assigned(first) | _assigned(second)) == settings.partitions,
                   90, "both workers to own partitions")
        assert not _assigned(first) & _assigned(second)
        run(produce(settings, records[:half]))
        wait_until(lambda: _processed(first) + _processed(second) >= half, 90, "first half")
        first.stop(signal.SIGTERM)
        wait_until(lambda: len(_assigned(second)) == settings.partitions, 90,
                   "the survivor to take over every partition")
        run(produce(settings, records[half:]))
        wait_for_outputs(settings, records, workers=[second])
    finally:
        first.stop()
        second.stop()


def _assigned(worker: WorkerProcess) -> set[int]:
    return set((worker.stats() or {}).get("assigned_partitions", []))


def _processed(worker: WorkerProcess) -> int:
    return (worker.stats() or {}).get("entries_in", 0)


def test_a_stopped_worker_leaves_its_group(broker, tmp_path: Path) -> None:
    """Even from the group's first generation (Tansu numbers it 0, and aiokafka leaves only
    from generations above 0), so a restart does not wait for a ghost's session to expire."""
    settings = worker_settings(broker, "leave", tmp_path)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        wait_until(lambda: (worker.stats() or {}).get("assigned_partitions"), 60, "assignment")
        assert run(_group_members(broker, settings.app_id))
    finally:
        assert worker.stop(signal.SIGTERM) == 0
    assert run(_group_members(broker, settings.app_id)) == []


async def _group_members(broker, group: str) -> list:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        (described,) = await admin.describe_consumer_groups([group])
        (state,) = described.to_object()["groups"]
        return state["members"]
    finally:
        await admin.close()
