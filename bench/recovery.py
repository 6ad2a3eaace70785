"""Recovery (section 6): seconds from a worker's restart until it processes again, with many
sessions in its tables.

A worker cleans `sessions` one-entry sessions (a header each: one state and one memory key per
session, so two changelog records) and is stopped with SIGTERM; a new
process is started, a record of a new session is produced at once, and the clock stops when its
cleaned output appears on the clean topic. Faust rebuilds the memory:// tables from their
changelogs first, so this is table recovery plus group join plus the first batch; the phases
are read from the restarted worker's log.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from datetime import datetime
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.procs import (
    Child,
    end_positions,
    http_json,
    new_topic,
    produce,
    worker_command,
    worker_settings,
)
from bench.workload import Synthetic
from stream.brokers import RunningBroker

LENGTH = 1  # the header: one state and one memory key per session
PHASES = (
    ("joined_group", "Joined group"),
    ("restoring_changelogs", "Restoring state from changelog topics"),
    ("recovery_complete", "Recovery complete"),
    ("worker_ready", "Worker ready"),
)


def _records(sessions: int, synthetic: Synthetic) -> list[tuple[bytes, bytes]]:
    return [(sid.encode(), raw) for wave in synthetic.waves(sessions, LENGTH, 1000)
            for sid, raw in wave]


def _wait_processed(child: Child, port: int, total: int, timeout: float) -> dict | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and child.alive():
        stats = http_json(port, "/stats")
        if stats and stats.get("entries_in", 0) >= total:
            return stats
        time.sleep(0.5)
    return None


async def _time_restart(broker: RunningBroker, child: Child, *, port: int, clean_topic: str,
                        input_topic: str, ends: dict[int, int], timeout: float) -> dict:
    probe_key = f"probe-{uuid.uuid4().hex[:8]}".encode()
    probe = Synthetic(seed=99).session(probe_key.decode())
    probe.next()  # the header
    child.start()
    started = child.started_at
    (p,) = await produce(broker.bootstrap, input_topic, [(probe_key, probe.next())])
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                isolation_level="read_committed")
    await consumer.start()
    stats_at = output_at = None
    try:
        tp = TopicPartition(clean_topic, p)
        consumer.assign([tp])
        consumer.seek(tp, ends[p])
        deadline = time.monotonic() + timeout
        while output_at is None and time.monotonic() < deadline and child.alive():
            batches = await consumer.getmany(tp, timeout_ms=200)
            if any(r.key == probe_key for records in batches.values() for r in records):
                output_at = time.monotonic()
            if stats_at is None and await asyncio.to_thread(http_json, port, "/stats", 0.3):
                stats_at = time.monotonic()
    finally:
        await consumer.stop()
    return {
        "seconds_to_first_output": (output_at - started) if output_at else None,
        "seconds_to_stats_page": (stats_at - started) if stats_at else None,
    }


_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def log_phases(text: str, started_wall: float) -> dict:
    """Seconds from process start to each phase's log line (lists: a phase may recur)."""
    phases: dict[str, list[float]] = {}
    for line in text.splitlines():
        stamp = _STAMP.match(line)
        if not stamp:
            continue
        for name, needle in PHASES:
            if needle in line:
                at = datetime.strptime(stamp[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                phases.setdefault(name, []).append(round(at - started_wall, 2))
    return phases


def recovery(broker: RunningBroker, sessions: int, workdir: Path, log) -> dict:
    tag = f"recovery-{uuid.uuid4().hex[:6]}"
    input_topic = f"{tag}-in"
    records = _records(sessions, Synthetic(seed=11))
    new_topic(broker.bootstrap, input_topic, records)
    settings = worker_settings(broker.url, tag, input_topic, workdir)
    env = settings.environment()
    first = Child("worker", worker_command(), workdir / f"{tag}-1.log", env).start()
    try:
        log(f"  recovery {broker.kind}: filling the tables with {sessions:,} sessions")
        filled = _wait_processed(first, settings.web_port, len(records), 120 + len(records) / 2000)
    finally:
        first.stop()
    result: dict = {"sessions": sessions, "entries": len(records)}
    if filled is None:
        result["error"] = f"the first worker did not process everything: {first.log_tail(10)}"
        return result
    result["table_keys_before"] = filled.get("table_keys")
    ends = asyncio.run(end_positions(broker.bootstrap, settings.clean_topic))
    second = Child("worker", worker_command(), workdir / f"{tag}-2.log", env)
    started_wall = time.time()
    try:
        log(f"  recovery {broker.kind}: restarting")
        timing = asyncio.run(_time_restart(
            broker, second, port=settings.web_port, clean_topic=settings.clean_topic,
            input_topic=input_topic, ends=ends, timeout=60.0 + sessions / 5000))
        after = http_json(settings.web_port, "/stats")
    finally:
        second.stop()
    result.update(timing)
    result["phases_s"] = log_phases(second.log_path.read_text(errors="replace"), started_wall)
    result["changelog_records"] = sum((filled.get("table_keys") or {}).values())
    result["table_keys_after"] = after.get("table_keys") if after else None
    if timing["seconds_to_first_output"] is None:
        result["error"] = f"no output after the restart: {second.log_tail(10)}"
    return result
