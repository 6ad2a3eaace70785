"""The streaming worker against a real broker: the same results as `clean`, kept across restarts."""

from __future__ import annotations

import contextlib
import signal
from collections import defaultdict
from pathlib import Path

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient

from stream.commands.clean import clean_session
from stream.engine import DROP_RULES, Engine
from tests.integration.harness import (
    WorkerProcess,
    consume_all,
    produce,
    run,
    wait_until,
    worker_settings,
)
from tests.integration.sessions import keyed_lines, write_sessions

pytestmark = pytest.mark.integration


def offline_results(
    records: list[tuple[bytes, bytes]],
) -> tuple[dict[str, list[bytes]], list[dict]]:
    """What `session-stream clean` gives for the same lines: kept lines per session, alerts."""
    by_session: dict[str, list[bytes]] = defaultdict(list)
    for key, raw in records:
        by_session[key.decode()].append(raw)
    kept: dict[str, list[bytes]] = defaultdict(list)
    alerts: list[dict] = []
    engine = Engine()
    for session_id, lines in by_session.items():
        numbered = list(enumerate(lines, 1))
        for verdict in clean_session(engine, session_id, f"{session_id}.jsonl", numbered):
            if verdict.output is not None:
                kept[session_id].append(verdict.output)
            alerts += [alert.as_json() for alert in verdict.alerts]
    return kept, alerts


def without_source(alert: dict) -> bytes:
    rest = {k: v for k, v in alert.items() if k != "source"}
    return orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)


def per_session(records) -> dict[str, list[bytes]]:
    grouped: dict[str, list[bytes]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        grouped[record.key.decode()].append(record.value)
    return grouped


def first_occurrences(values: list[bytes]) -> list[bytes]:
    """At-least-once may repeat a record, but only byte for byte: keep the first of each."""
    return list(dict.fromkeys(values))


def outputs(settings) -> tuple[dict[str, list[bytes]], list, list]:
    clean = run(consume_all(settings, settings.clean_topic))
    alerts = run(consume_all(settings, settings.alerts_topic))
    dlq = run(consume_all(settings, settings.dlq_topic))
    kept = {sid: first_occurrences(values) for sid, values in per_session(clean).items()}
    return kept, alerts, dlq


def wait_for_outputs(settings, records, timeout: float = 120.0, workers=()):
    """Poll the output topics until they hold what the offline run of `records` gives,
    restarting the `workers` that exit for a restart, as a supervisor would."""
    expected_kept, expected_alerts = offline_results(records)
    wanted_alerts = {without_source(a) for a in expected_alerts}
    latest = None

    def arrived() -> bool:
        nonlocal latest
        for worker in workers:
            worker.restart_if_stalled()
        latest = outputs(settings)
        kept, alerts, _ = latest
        got_alerts = {without_source(orjson.loads(r.value)) for r in alerts}
        return kept == dict(expected_kept) and got_alerts >= wanted_alerts

    with contextlib.suppress(TimeoutError):  # the assertions below say what differs
        wait_until(arrived, timeout, "the outputs of every record")
    kept, alerts, dlq = latest
    assert kept == dict(expected_kept), _difference(kept, dict(expected_kept))
    alert_docs = [orjson.loads(record.value) for record in alerts]
    assert {without_source(a) for a in alert_docs} == wanted_alerts
    # A record produced twice after a crash is the same record: same id, same bytes.
    by_id = defaultdict(set)
    for doc in alert_docs:
        by_id[doc["id"]].add(without_source(doc))
    assert all(len(variants) == 1 for variants in by_id.values())
    return kept, alert_docs, dlq


def _difference(got: dict[str, list[bytes]], expected: dict[str, list[bytes]]) -> str:
    """Which sessions differ and where, for a failure message that says what went wrong."""
    lines = []
    for session in sorted(got.keys() | expected.keys()):
        mine, theirs = got.get(session, []), expected.get(session, [])
        if mine != theirs:
            index = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False))
                          if a != b),
                         min(len(mine), len(theirs)))
            lines.append(f"{session}: {len(mine)} kept, {len(theirs)} expected, first "
                         f"difference at {index}: {mine[index:index + 1]!r:.300} vs "
                         f"{theirs[index:index + 1]!r:.300}")
    return "\n".join(lines[:20])


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
