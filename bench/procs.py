"""Processes and broker chores shared by the end-to-end, recovery and profile benchmarks."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from stream.brokers import RunningBroker, free_port, start_broker
from stream.brokers.local import die_with_parent_hook, log_tail, stop_process
from stream.consumers.tail import read_topic
from stream.kafka.admin import create_topics
from stream.kafka.ends import log_end_offsets
from stream.settings import Settings

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
QUIX_VENV = BENCH / ".venv-quix"
PARTITIONS = 4
# Group session timeout of the e2e contenders: Tansu holds a new group's JoinGroup for half of
# it, which falls outside the measured span but not outside the run's time.
E2E_SESSION_TIMEOUT_S = 6


@dataclass
class Child:
    """A subprocess with its output in a log file."""

    name: str
    cmd: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    process: subprocess.Popen | None = None
    started_at: float = 0.0

    def start(self) -> Child:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.started_at = time.monotonic()
            self.process = subprocess.Popen(
                self.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=self.env, cwd=REPO, preexec_fn=die_with_parent_hook(),  # noqa: PLW1509
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 25.0) -> int | None:
        return stop_process(self.process, timeout=timeout) if self.process else None

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def interpolate(series: Sequence[tuple[float, float]], at: float) -> float | None:
    """The value of a (time, value) series at `at`, linear between samples."""
    if not series:
        return None
    if at <= series[0][0]:
        return series[0][1]
    for (t0, v0), (t1, v1) in itertools.pairwise(series):
        if t0 <= at <= t1:
            return v0 + (v1 - v0) * (at - t0) / (t1 - t0) if t1 > t0 else v1
    return series[-1][1]


def python_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SESSION_STREAM_")}


def worker_settings(broker_url: str, tag: str, input_topic: str, workdir: Path,
                    **changes: object) -> Settings:
    (workdir / tag).mkdir(parents=True, exist_ok=True)  # Faust makes only the last level
    return Settings.load(environ={}).replace(
        broker=broker_url,
        app_id=f"bench-{tag}",
        input_topic=input_topic,
        clean_topic=f"{tag}-clean",
        alerts_topic=f"{tag}-alerts",
        dlq_topic=f"{tag}-dlq",
        data_dir=str(workdir / tag / "data"),
        partitions=PARTITIONS,
        web_port=free_port(),
        log_level="info",  # at warn, faust.Worker sets the root logger to DEBUG (spinner)
        **changes,
    )


def worker_command(python: str = sys.executable) -> list[str]:
    return [python, "-m", "stream.cli", "worker"]


# the sums and counts of the worker's histograms in its /metrics text
_HISTOGRAM_SAMPLE = re.compile(rb"^(session_stream_\w+_seconds)_(sum|count) ([0-9.e+-]+)$",
                               re.MULTILINE)


def worker_batch_metrics(port: int) -> dict:
    """Means per batch from a worker's histograms: what its delivery took (exactly once, its
    transactions), how long its lane waited for the batch before, the whole batch."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
            text = reply.read()
    except OSError:
        return {}
    values = {(name, kind): float(value)
              for name, kind, value in _HISTOGRAM_SAMPLE.findall(text)}
    out: dict = {}
    for name, key in ((b"session_stream_delivery_seconds", "delivery_ms_per_batch"),
                      (b"session_stream_commit_wait_seconds", "commit_wait_ms_per_batch"),
                      (b"session_stream_batch_seconds", "batch_ms")):
        count = values.get((name, b"count"))
        if count:
            out[key] = 1000 * values[(name, b"sum")] / count
            out.setdefault("batches", int(count))
    return out


def http_json(port: int, path: str, timeout: float = 1.0) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as reply:
            return json.loads(reply.read())
    except (OSError, ValueError):
        return None


def create(bootstrap: str, topics: Sequence[str]) -> None:
    """Topics with 4 partitions and retention.ms=-1 (Tansu needs an explicit config for Quix)."""
    create_topics(bootstrap, dict.fromkeys(topics, PARTITIONS), config={"retention.ms": "-1"})


def new_topic(bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes]]) -> None:
    """A topic made by `create`, holding `records`."""
    create(bootstrap, [topic])
    asyncio.run(produce(bootstrap, topic, records))


async def produce(bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes]],
                  window: int = 2000) -> dict[int, int]:
    """Send every (key, value) and wait for all; returns each partition's end offset."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=10,
                                max_batch_size=1024 * 1024, request_timeout_ms=60_000)
    await producer.start()
    ends: dict[int, int] = {}
    try:
        for first in range(0, len(records), window):
            pending = [await producer.send(topic, value, key=key)
                       for key, value in records[first : first + window]]
            for meta in await asyncio.gather(*pending):
                ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
    finally:
        await producer.stop()
    return ends


async def committed(bootstrap: str, group: str, topic: str, partitions: Sequence[int]) -> int:
    """Offsets the group has committed on `topic`, summed (0 for partitions without)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        offsets = await admin.list_consumer_group_offsets(group, partitions=tps)
    finally:
        await admin.close()
    return sum(max(0, meta.offset) for meta in offsets.values() if meta is not None)


@dataclass
class OutputStats:
    records: int = 0
    first_ms: int | None = None
    last_ms: int | None = None
    timestamps: list[int] = field(default_factory=list)
    by_topic: dict[str, int] = field(default_factory=dict)

    def add(self, timestamp: int, topic: str) -> None:
        self.records += 1
        self.by_topic[topic] = self.by_topic.get(topic, 0) + 1
        self.timestamps.append(timestamp)
        self.first_ms = timestamp if self.first_ms is None else min(self.first_ms, timestamp)
        self.last_ms = timestamp if self.last_ms is None else max(self.last_ms, timestamp)


async def read_outputs(broker_url: str, topics: Sequence[str]) -> OutputStats:
    """Count every record of `topics` and keep their timestamps (the producer's CreateTime)."""
    stats = OutputStats()
    settings = Settings.load(environ={}).replace(broker=broker_url)
    for topic in topics:
        async for record in read_topic(settings, topic, follow=False, idle_timeout=3.0):
            stats.add(record.timestamp, topic)
    return stats


async def end_positions(bootstrap: str, topic: str) -> dict[int, int]:
    """The true end of every partition of `topic` (on Tansu, ListOffsets(latest) may lie
    short of it)."""
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    ends = await log_end_offsets({"bootstrap_servers": bootstrap}, tps)
    return {tp.partition: end for tp, end in ends.items()}


# What bench/quix_engine_peer.py imports of this project's dependencies, at the versions this
# interpreter has, so the engine runs there on the same libraries as in the worker.
ENGINE_DEPENDENCIES = ("orjson", "msgpack", "xxhash", "mypy_extensions")


def peer_env() -> dict[str, str]:
    """The environment of a peer in the Quix venv that imports this project from the tree: the
    same interpreter as the worker's, so the tree's compiled modules load there too."""
    env = python_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def engine_build(python: str) -> str:
    """Which build of the engine `python` runs with peer_env (as the results' engine_build)."""
    probe = ("from stream import pure; from stream.engine import engine; "
             "print('compiled (mypyc)' if pure.is_compiled(engine) else 'Python source')")
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False,
                          env=peer_env(), cwd=REPO)
    return done.stdout.strip() if done.returncode == 0 else \
        f"does not import: {done.stderr.strip()[-200:]}"


def quix_python(install: bool) -> tuple[str | None, str]:
    """The Quix Streams venv's python, made on demand; (None, reason) when unavailable."""
    python = QUIX_VENV / "bin" / "python"
    probe = [str(python), "-c", f"import quixstreams, {', '.join(ENGINE_DEPENDENCIES)}; "
             "print(quixstreams.__version__)"]
    if python.exists():
        done = subprocess.run(probe, capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return str(python), f"quixstreams {done.stdout.strip()}"
    if not install:
        return None, f"no Quix Streams venv at {QUIX_VENV} (a full run creates it)"
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(QUIX_VENV)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "quixstreams", *(f"{name}=={metadata.version(name)}" for name in ENGINE_DEPENDENCIES)],
    ]
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, check=False, timeout=600)
        except subprocess.TimeoutExpired:
            return None, f"{' '.join(step[:3])} timed out"
        if done.returncode != 0:
            shutil.rmtree(QUIX_VENV, ignore_errors=True)
            reason = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["failed"]
            return None, f"could not install quixstreams: {reason[0]}"
    done = subprocess.run(probe, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return None, f"quixstreams installed but does not import: {done.stderr.strip()[-200:]}"
    return str(python), f"quixstreams {done.stdout.strip()}"


def print_alone(section: Callable[..., dict], kind: str, seconds: float) -> None:
    """A section of the benchmark run alone, `python -m bench.<section>`: on a broker of its
    own, for `seconds` of load, its results printed as JSON."""
    broker: RunningBroker = start_broker(kind)
    try:
        with tempfile.TemporaryDirectory() as workdir:
            print(json.dumps(section(broker, seconds, Path(workdir), print), indent=1))
    finally:
        broker.stop()
