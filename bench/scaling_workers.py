"""More than one worker: one worker alone against two in one consumer group, in one run.

Both runs consume the e2e section's 4-partition input topic. A run is one or two worker
processes with the same app id (so one consumer group, one set of changelogs and outputs), each
with its own web port and data folder; it is done when the group has committed every input
offset. Its rate is the input count over the span from the first to the last output record, as
in the e2e section (bench/e2e.py), and every worker's CPU and the broker's are read from /proc
over that span and charged per input entry.

Two workers started together join one after the other (the test broker has no initial
rebalance delay), and the first is given every partition and cleans for a second or so before
its next heartbeat tells it of the rebalance that hands half of them to the second: a cost of
starting, not of running two. So the run polls each worker's /stats page (every 0.1 s) for
its assigned partitions and entries in, and notes when and after how many entries the
assignment was last seen to change; the steady rate, which the ratio compares, counts the
entries after that over the span from the first output after it to the last. With nothing
taken in before the last change (one worker, usually) it is the e2e rate. The CPU figures are
charged over the steady span.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.procs import (
    E2E_SESSION_TIMEOUT_S,
    PARTITIONS,
    Child,
    OutputStats,
    committed,
    cpu_seconds,
    http_json,
    interpolate,
    read_outputs,
    worker_command,
    worker_settings,
)
from stream.brokers import RunningBroker, free_port

STATS_POLL_S = 0.1
COMMITS_POLL_S = 0.5
COUNTS = (1, 2)


@dataclass
class _Member:
    child: Child
    port: int
    cpu: list[tuple[float, float]] = field(default_factory=list)
    assigned: tuple[int, ...] = ()
    entries_in: int = 0


def _members(broker: RunningBroker, input_topic: str, count: int, workdir: Path) -> tuple[
        list[_Member], str, list[str]]:
    tag = f"workers{count}-{uuid.uuid4().hex[:6]}"
    base = worker_settings(broker.url, tag, input_topic, workdir,
                           session_timeout=float(E2E_SESSION_TIMEOUT_S))
    members = []
    for n in range(count):
        settings = base.replace(web_port=free_port(), data_dir=str(workdir / tag / f"data{n}"))
        child = Child(f"worker{n}", worker_command(), workdir / f"{tag}-{n}.log",
                      settings.environment())
        members.append(_Member(child, settings.web_port))
    return members, base.app_id, list(base.output_topics)


def _poll(member: _Member) -> None:
    cpu = cpu_seconds(member.child.pid)
    if cpu is not None:
        member.cpu.append((time.time(), cpu))
    stats = http_json(member.port, "/stats", 0.3)
    if stats:
        member.assigned = tuple(stats.get("assigned_partitions") or ())
        member.entries_in = stats.get("entries_in", 0)


@dataclass
class _Watch:
    """What the polls saw: the broker's CPU, and when the assignment was last seen to change,
    with the entries taken in by then."""

    broker_cpu: list[tuple[float, float]] = field(default_factory=list)
    settled_at: float = 0.0
    entries_in_then: int = 0
    assignment: tuple[tuple[int, ...], ...] = ()
    error: str | None = None


def _watch(members: list[_Member], broker: RunningBroker, group: str, input_topic: str, *,
           total: int, timeout: float) -> _Watch:
    """Poll until the group has committed every input offset."""
    watch = _Watch()
    deadline = time.monotonic() + timeout
    next_commits = 0.0
    while time.monotonic() < deadline:
        for member in members:
            _poll(member)
        broker_seconds = cpu_seconds(broker.process.pid)
        if broker_seconds is not None:
            watch.broker_cpu.append((time.time(), broker_seconds))
        assignment = tuple(m.assigned for m in members)
        if assignment != watch.assignment:
            watch.assignment, watch.settled_at = assignment, time.time()
            watch.entries_in_then = sum(m.entries_in for m in members)
        dead = [m for m in members if not m.child.alive()]
        if dead:
            watch.error = f"{dead[0].child.name} exited: {dead[0].child.log_tail(15)}"
            return watch
        if time.monotonic() >= next_commits:
            next_commits = time.monotonic() + COMMITS_POLL_S
            try:
                done = asyncio.run(committed(broker.bootstrap, group, input_topic,
                                             range(PARTITIONS)))
            except Exception:  # noqa: BLE001 - a slow broker answer: ask again
                done = -1
            if done >= total:
                for member in members:
                    _poll(member)
                return watch
        time.sleep(STATS_POLL_S)
    watch.error = f"not done after {timeout:.0f}s"
    return watch


def _rates(result: dict, stats: OutputStats, watch: _Watch, members: list[_Member],
           total: int) -> None:
    span = (stats.last_ms - stats.first_ms) / 1000
    result["span_s"] = span
    result["entries_per_s"] = total / span
    # the steady span: from the first output after the assignment last changed
    later = [ms for ms in stats.timestamps if ms >= watch.settled_at * 1000]
    steady_from = min(later, default=stats.last_ms) if watch.entries_in_then else stats.first_ms
    steady_entries = total - watch.entries_in_then
    if stats.last_ms <= steady_from or steady_entries <= 0:
        result.setdefault("error", "no outputs after the last assignment")
        return
    result["steady_span_s"] = (stats.last_ms - steady_from) / 1000
    result["steady_entries_per_s"] = steady_entries / result["steady_span_s"]

    def per_entry(series: list[tuple[float, float]]) -> float | None:
        first = interpolate(series, steady_from / 1000)
        last = interpolate(series, stats.last_ms / 1000)
        return None if first is None or last is None else 1e6 * (last - first) / steady_entries

    result["worker_cpu_us_per_entry"] = [per_entry(m.cpu) for m in members]
    result["broker_cpu_us_per_entry"] = per_entry(watch.broker_cpu)


def run_group(broker: RunningBroker, input_topic: str, count: int, *, total: int,
              workdir: Path, timeout: float) -> dict:
    members, group, outputs = _members(broker, input_topic, count, workdir)
    for member in members:
        member.child.start()
    try:
        watch = _watch(members, broker, group, input_topic, total=total, timeout=timeout)
    finally:
        for member in members:
            member.child.stop()
    stats = asyncio.run(read_outputs(broker.url, outputs))
    result: dict = {
        "workers": count,
        "entries": total,
        "output_records": stats.records,
        "entries_in_by_worker": [m.entries_in for m in members],
        "partitions_by_worker": [list(m.assigned) for m in members],
        "entries_in_before_last_assignment": watch.entries_in_then,
    }
    if all(m.entries_in for m in members):
        # the input's partitions are of unequal sizes: with unlimited cores, the run could be
        # at most this much faster than one worker doing it all
        result["split_bound"] = total / max(m.entries_in for m in members)
    if watch.error:
        result["error"] = watch.error[-1500:]
    if stats.records < 2 or stats.last_ms <= stats.first_ms:
        result.setdefault("error", "fewer than two output records")
    else:
        _rates(result, stats, watch, members, total)
    return result


def run(broker: RunningBroker, input_topic: str, *, total: int, rounds: int, workdir: Path,
        log: Callable[[str], None]) -> dict:
    """`rounds` of a one-worker and a two-worker run, the order swapped every round."""
    timeout = 90.0 + total / 1500.0
    runs: dict[int, list[dict]] = {n: [] for n in COUNTS}
    for round_no in range(rounds):
        for count in COUNTS if round_no % 2 == 0 else COUNTS[::-1]:
            log(f"  workers {broker.kind} round {round_no + 1}/{rounds}: {count} worker(s)")
            result = run_group(broker, input_topic, count, total=total, workdir=workdir,
                               timeout=timeout)
            result["round"] = round_no + 1
            runs[count].append(result)
            rate = result.get("steady_entries_per_s")
            before = result["entries_in_before_last_assignment"]
            log(f"    -> {rate:,.0f} entries/s steady ({before:,} entries in before the last "
                f"assignment)" if rate else f"    -> {result.get('error')}")
    summary: dict = {}
    for count in COUNTS:
        done = [r for r in runs[count] if r.get("steady_entries_per_s") and not r.get("error")]

        def median(values: list) -> float | None:
            values = [v for v in values if v is not None]
            return statistics.median(values) if values else None

        summary[f"workers_{count}"] = {
            "steady_entries_per_s": median([r["steady_entries_per_s"] for r in done]),
            "entries_per_s": median([r["entries_per_s"] for r in done]),
            # per worker process (its index in the run), then all of them together
            "worker_cpu_us_per_entry": [median([r["worker_cpu_us_per_entry"][n] for r in done])
                                        for n in range(count)],
            "workers_cpu_us_per_entry": median([
                sum(r["worker_cpu_us_per_entry"]) for r in done
                if None not in r["worker_cpu_us_per_entry"]]),
            "broker_cpu_us_per_entry": median([r.get("broker_cpu_us_per_entry") for r in done]),
            "split_bound": median([r.get("split_bound") for r in done]),
            "rounds": runs[count],
        }
    for key, rate in (("ratio_2_over_1", "steady_entries_per_s"),
                      ("ratio_2_over_1_whole_span", "entries_per_s")):
        one, two = (summary[f"workers_{n}"][rate] for n in COUNTS)
        summary[key] = two / one if one and two else None
    summary["rounds"] = rounds
    return summary
