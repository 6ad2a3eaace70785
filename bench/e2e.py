"""End to end on a local broker (section 5): the worker against the floors of this stack.

The workload is produced once to a 4-partition input topic; after an untimed warm-up run of
every contender (`warm_up`), each contender, in turn and in a rotating order per round, consumes
all of it with a consumer group and output topics of its own. A contender is done when its
group has committed every input offset. Its rate is the input count over the span from its
first to its last output record (the timestamps its producer set): consumer start-up, group
join and commit lag fall outside that span for every contender alike.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.procs import (
    E2E_SESSION_TIMEOUT_S,
    PARTITIONS,
    Child,
    committed,
    cpu_seconds,
    create,
    http_json,
    interpolate,
    new_topic,
    peer_env,
    python_env,
    read_outputs,
    worker_batch_metrics,
    worker_command,
    worker_settings,
)
from stream.brokers import RunningBroker, free_port

POLL_S = 0.5


@dataclass
class Launch:
    """One contender's run: its process, the group whose commits say it is done, its outputs."""

    child: Child
    group: str
    outputs: list[str]
    stats_port: int | None = None
    clean: str | None = None  # the clean topic of a contender that cleans: counted alone


@dataclass
class Contender:
    name: str
    describe: str
    make: Callable[[RunningBroker, str, str, Path], Launch]
    kafka_only: bool = False  # it needs transactions, which Tansu does not grant


def _worker(guarantee: str) -> Callable[[RunningBroker, str, str, Path], Launch]:
    def make(broker: RunningBroker, input_topic: str, tag: str, workdir: Path) -> Launch:
        settings = worker_settings(broker.url, tag, input_topic, workdir,
                                   session_timeout=float(E2E_SESSION_TIMEOUT_S),
                                   processing_guarantee=guarantee)
        child = Child("worker", worker_command(), workdir / f"{tag}.log",
                      settings.environment())
        return Launch(child, settings.app_id, list(settings.output_topics), settings.web_port,
                      settings.clean_topic)

    return make


def _raw(broker: RunningBroker, input_topic: str, tag: str, workdir: Path) -> Launch:
    output, group = f"{tag}-out", f"bench-{tag}"
    create(broker.bootstrap, [output])
    cmd = [sys.executable, "-m", "bench.raw_peer", "--bootstrap", broker.bootstrap,
           "--input", input_topic, "--output", output, "--group", group,
           "--session-timeout", str(E2E_SESSION_TIMEOUT_S)]
    return Launch(Child("raw", cmd, workdir / f"{tag}.log", python_env()), group, [output])


def _faust(broker: RunningBroker, input_topic: str, tag: str, workdir: Path) -> Launch:
    output, group = f"{tag}-out", f"bench-{tag}"
    (workdir / tag).mkdir(parents=True, exist_ok=True)
    # Faust crash-loops on topics it auto-creates with other partition counts: pre-create all.
    create(broker.bootstrap, [output, f"{group}-sessions-changelog"])
    cmd = [sys.executable, "-m", "bench.faust_peer", "--broker", broker.url,
           "--input", input_topic, "--output", output, "--group", group,
           "--web-port", str(free_port()), "--data-dir", str(workdir / tag / "data"),
           "--session-timeout", str(E2E_SESSION_TIMEOUT_S)]
    return Launch(Child("faust", cmd, workdir / f"{tag}.log", python_env()), group, [output])


def _passthrough_peer(python: str, name: str, script: str, describe: str,
                      state: bool = False) -> Contender:
    """A peer script of the Quix venv that reads the input and writes one output topic."""
    def make(broker: RunningBroker, input_topic: str, tag: str, workdir: Path) -> Launch:
        output, group = f"{tag}-out", f"bench-{tag}"
        create(broker.bootstrap, [output])
        cmd = [python, str(Path(__file__).with_name(script)),
               "--bootstrap", broker.bootstrap, "--input", input_topic, "--output", output,
               "--group", group, "--session-timeout", str(E2E_SESSION_TIMEOUT_S)]
        if state:
            cmd += ["--state-dir", str(workdir / tag / "state")]
        return Launch(Child(name, cmd, workdir / f"{tag}.log", python_env()), group, [output])

    return Contender(name, describe, make)


def quix_contender(python: str) -> Contender:
    return _passthrough_peer(python, "quix", "quix_peer.py",
                             "Quix Streams, per-session RocksDB state with changelog", state=True)


def quix_engine_contender(python: str) -> Contender:
    """Quix Streams running this engine (bench/quix_engine_peer.py), with the worker's
    settings, so the same work as the worker's."""
    def make(broker: RunningBroker, input_topic: str, tag: str, workdir: Path) -> Launch:
        settings = worker_settings(broker.url, tag, input_topic, workdir,
                                   session_timeout=float(E2E_SESSION_TIMEOUT_S))
        create(broker.bootstrap, list(settings.output_topics))
        cmd = [python, str(Path(__file__).with_name("quix_engine_peer.py"))]
        env = settings.environment(peer_env())
        return Launch(Child("quix_engine", cmd, workdir / f"{tag}.log", env), settings.app_id,
                      list(settings.output_topics), clean=settings.clean_topic)

    return Contender("quix_engine", "Quix Streams running this engine, state in RocksDB with "
                     "changelog, clean/alerts/dead-letter out", make)


def raw_confluent_contender(python: str) -> Contender:
    return _passthrough_peer(python, "raw_confluent", "confluent_peer.py",
                             "raw confluent-kafka (librdkafka) consume -> produce -> commit, "
                             "no processing")


# At least once, as every peer below runs: the figures before exactly once compare with these.
WORKER = Contender("worker", "session-stream worker (engine, tables, batches), at least once",
                   _worker("at_least_once"))
WORKER_EOS = Contender("worker_eos", "the same worker exactly once: a transaction per input "
                       "partition a batch", _worker("exactly_once_v2"), kafka_only=True)
RAW = Contender("raw_aiokafka", "raw aiokafka getmany -> produce -> commit, no processing", _raw)
NAIVE_FAUST = Contender("naive_faust", "plain Faust agent, Table update per entry", _faust)


@dataclass
class Progress:
    done_at: float | None = None
    error: str | None = None
    stats: dict | None = None
    batches: dict = field(default_factory=dict)  # the worker's means per batch (/metrics)
    # (wall time, CPU seconds) of the contender and of the broker, to charge each with the CPU
    # it used between the first and the last output record.
    own_cpu: list[tuple[float, float]] = field(default_factory=list)
    broker_cpu: list[tuple[float, float]] = field(default_factory=list)

    def sample(self, child: Child, broker: RunningBroker) -> None:
        _sample(self.own_cpu, child.pid)
        _sample(self.broker_cpu, broker.process.pid)


def _wait_done(launch: Launch, broker: RunningBroker, input_topic: str, total: int,
               timeout: float) -> Progress:
    """Poll the group's committed offsets until they cover every input record."""
    child, progress = launch.child, Progress()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        progress.sample(child, broker)
        if not child.alive():
            progress.error = f"exited {child.process.returncode}: {child.log_tail(15)}"
            return progress
        try:
            done = asyncio.run(committed(broker.bootstrap, launch.group, input_topic,
                                         range(PARTITIONS)))
        except Exception as failure:  # noqa: BLE001 - a slow broker answer: ask again
            done = -1
            progress.error = f"offset query: {type(failure).__name__}"
        if done >= total:
            progress.sample(child, broker)
            progress.done_at = time.monotonic()
            progress.error = None
            if launch.stats_port is not None:
                progress.stats = http_json(launch.stats_port, "/stats")
                progress.batches = worker_batch_metrics(launch.stats_port)
            return progress
        time.sleep(POLL_S)
    progress.error = f"not done after {timeout:.0f}s: {child.log_tail(10)}"
    return progress


def run_one(contender: Contender, broker: RunningBroker, input_topic: str, *, total: int,
            workdir: Path, timeout: float) -> dict:
    tag = f"{contender.name.replace('_', '')}-{uuid.uuid4().hex[:6]}"
    launch = contender.make(broker, input_topic, tag, workdir)
    child = launch.child.start()
    try:
        progress = _wait_done(launch, broker, input_topic, total, timeout)
    finally:
        child.stop()
    outputs = asyncio.run(read_outputs(broker.url, launch.outputs))
    result: dict = {
        "contender": contender.name,
        "entries": total,
        "output_records": outputs.records,
        **({"clean_records": outputs.by_topic.get(launch.clean, 0)} if launch.clean else {}),
        "wall_s_to_committed": (progress.done_at - child.started_at)
        if progress.done_at else None,
    }
    if progress.error:
        result["error"] = progress.error[-1500:]
    if progress.stats is not None:
        result["worker_entries_in"] = progress.stats.get("entries_in")
        result.update(progress.batches)
    if outputs.records >= 2 and outputs.last_ms > outputs.first_ms:
        span = (outputs.last_ms - outputs.first_ms) / 1000
        ordered = sorted(outputs.timestamps)
        mid = (ordered[int(0.9 * len(ordered))] - ordered[int(0.1 * len(ordered))]) / 1000
        result["span_s"] = span
        result["entries_per_s"] = total / span
        result["entries_per_s_p10_p90"] = 0.8 * total / mid if mid > 0 else None
        for name, series in (("contender", progress.own_cpu), ("broker", progress.broker_cpu)):
            first = interpolate(series, outputs.first_ms / 1000)
            last = interpolate(series, outputs.last_ms / 1000)
            if first is not None and last is not None:
                result[f"{name}_cpu_us_per_entry"] = 1e6 * (last - first) / total
    return result


def _sample(series: list[tuple[float, float]], pid: int) -> None:
    cpu = cpu_seconds(pid)
    if cpu is not None:
        series.append((time.time(), cpu))


def _timeout(total: int) -> float:
    return 90.0 + total / 1500.0


def warm_up(broker: RunningBroker, records: Sequence[tuple[bytes, bytes]], *,
            contenders: Sequence[Contender], workdir: Path,
            log: Callable[[str], None]) -> dict | None:
    """One untimed run of every contender over `records`, on a topic of their own, before
    the timed rounds: a fresh Kafka's JVM compiles its hot paths while it serves its first
    runs, on the cores the first contender needs (figures in bench/README.md)."""
    if not records:
        return None
    topic = f"bench-warmup-{uuid.uuid4().hex[:6]}"
    new_topic(broker.bootstrap, topic, records)
    runs = {}
    for contender in contenders:
        log(f"  e2e {broker.kind} warm-up: {contender.name}")
        result = run_one(contender, broker, topic, total=len(records), workdir=workdir,
                         timeout=_timeout(len(records)))
        # no rate: a small warm-up goes out in a batch or two, whose span means nothing
        runs[contender.name] = {key: result[key] for key in ("output_records", "error")
                                if key in result}
    return {"entries": len(records), "runs": runs}


def run_rounds(broker: RunningBroker, input_topic: str, *, total: int,
               contenders: Sequence[Contender], rounds: int, workdir: Path,
               log: Callable[[str], None]) -> dict:
    timeout = _timeout(total)
    runs: dict[str, list[dict]] = {c.name: [] for c in contenders}
    for round_no in range(rounds):
        shift = round_no % len(contenders)
        order = list(contenders[shift:]) + list(contenders[:shift])
        for contender in order:
            log(f"  e2e {broker.kind} round {round_no + 1}/{rounds}: {contender.name}")
            result = run_one(contender, broker, input_topic, total=total, workdir=workdir,
                             timeout=timeout)
            result["round"] = round_no + 1
            runs[contender.name].append(result)
            rate = result.get("entries_per_s")
            log(f"    -> {rate:,.0f} entries/s" if rate else f"    -> {result.get('error')}")
    summary = {}
    for contender in contenders:
        rates = [r["entries_per_s"] for r in runs[contender.name] if r.get("entries_per_s")]
        cpu = {key: [r[key] for r in runs[contender.name] if r.get(key) is not None]
               for key in ("contender_cpu_us_per_entry", "broker_cpu_us_per_entry",
                           "delivery_ms_per_batch", "commit_wait_ms_per_batch", "batch_ms")}
        summary[contender.name] = {
            "describe": contender.describe,
            "entries_per_s": statistics.median(rates) if rates else None,
            **{key: statistics.median(values) if values else None
               for key, values in cpu.items()},
            "rounds": runs[contender.name],
        }
    ratios = {}
    worker = summary.get("worker", {}).get("entries_per_s")
    for name in ("naive_faust", "quix", "quix_engine", "raw_aiokafka", "raw_confluent"):
        other = summary.get(name, {}).get("entries_per_s")
        ratios[f"worker_over_{name}"] = worker / other if worker and other else None
    raw, confluent = (summary.get(name, {}).get("entries_per_s")
                      for name in ("raw_aiokafka", "raw_confluent"))
    ratios["raw_confluent_over_raw_aiokafka"] = confluent / raw if raw and confluent else None
    eos = summary.get("worker_eos", {}).get("entries_per_s")
    ratios["worker_eos_over_worker"] = eos / worker if worker and eos else None
    return {"contenders": summary, "ratios": ratios, "rounds": rounds,
            "same_work": _same_work(runs)}


def _same_work(runs: dict[str, list[dict]]) -> dict | None:
    """The clean records the worker and Quix-with-this-engine wrote, per round: equal counts
    say the peer did the same work (both clean the same input with the same rules)."""
    if "quix_engine" not in runs or "worker" not in runs:
        return None
    counts = {name: [r.get("clean_records") for r in runs[name]]
              for name in ("worker", "quix_engine")}
    return {"clean_records": counts,
            "equal": len(set(counts["worker"] + counts["quix_engine"])) == 1}
