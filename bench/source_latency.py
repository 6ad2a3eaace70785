"""Source latency (section `source_latency`): from a row's commit in the agent store to its
record on the clean topic, through `session-stream gateway` and through `follow-sqlite`.

A real gateway cannot run 200 turns a second here (a turn takes seconds), so
`bench/openclaw_standin.py` plays OpenClaw: it commits rows into a store in OpenClaw's schema
at a steady rate over many sessions and emits the matching `session.message` after each
commit. For each source in turn: fresh topics, the stand-in, a worker, the source, and a
consumer of the clean topic in this process; the sessions' headers go through first (the
pipeline is warm and the group joined before anything is timed), then the steady load. An
entry's latency is the time its record was received from the clean topic less the time just
after its commit (one clock: one machine). Both sources run with their defaults (a whole-store
read every 1 s, a look at the store's change counter every 50 ms, 10 ms while the store is
written to). Every third row is a custom row with no event (`bench/openclaw_standin.py`),
reported apart as `no_event`. Once everything is through, the source's CPU is read from /proc
over IDLE_SECONDS of an idle store.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer

from bench.procs import (
    E2E_SESSION_TIMEOUT_S,
    PARTITIONS,
    Child,
    cpu_seconds,
    create,
    print_alone,
    python_env,
    worker_command,
    worker_settings,
)
from stream.brokers import RunningBroker, free_port
from stream.settings import Settings

SOURCES = ("gateway", "follow_sqlite")
RATE = 200.0
SESSIONS = 50
READY_TIMEOUT = 120.0
FETCH_MAX_WAIT_MS = 5
IDLE_SECONDS = 10.0


class Arrivals:
    """Receives a topic on a thread of its own; when each entry first arrived, by what
    `identify` says of its record (its entry id by default).

    Its fetches wait at most FETCH_MAX_WAIT_MS: Tansu holds a fetch for up to its max wait even
    while records come in (aiokafka's default of 500 ms put 130 ms on a median here), which
    would be the measuring consumer's delay, not the pipeline's.
    """

    def __init__(self, bootstrap: str, topic: str,
                 identify: Callable[[Any], object] = lambda record: orjson.loads(
                     record.value).get("id")) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.identify = identify
        self.arrived: dict[Any, int] = {}
        self._loop = asyncio.new_event_loop()
        self._task: asyncio.Task | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Arrivals:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(10)

    def _run(self) -> None:
        async def consume() -> None:
            consumer = AIOKafkaConsumer(
                self.topic, bootstrap_servers=self.bootstrap, group_id=None,
                auto_offset_reset="earliest", fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
                isolation_level="read_committed",
            )
            await consumer.start()
            try:
                async for record in consumer:
                    now = time.time_ns()
                    self.arrived.setdefault(self.identify(record), now)
            finally:
                await consumer.stop()

        self._task = self._loop.create_task(consume())
        try:
            self._loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        finally:
            self._loop.close()


def _commits(path: Path, custom: set[str] | None = None) -> tuple[dict[str, int], bool]:
    """Entry id -> commit time (ns), and whether the stand-in is done; the ids of the rows it
    committed with no event are added to `custom`."""
    commits: dict[str, int] = {}
    done = False
    if path.exists():
        for line in path.read_text().splitlines():
            if line == "done":
                done = True
            elif "\t" in line:
                entry_id, at, *kind = line.split("\t")
                commits[entry_id] = int(at)
                if kind and custom is not None:
                    custom.add(entry_id)
    return commits, done


def _wait(condition: Callable[[], bool], timeout: float, children: list[Child]) -> str | None:
    """None once `condition` holds; else why not (a child exited, or the time ran out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return None
        for child in children:
            if not child.alive():
                return f"{child.name} exited: {child.log_tail(15)}"
        time.sleep(0.1)
    return f"timed out after {timeout:.0f}s"


def _source_command(name: str, store: Path, url: str, settings: Settings, work: Path) -> list:
    common = ["--checkpoint", str(work / "checkpoint.json"), "--broker", settings.broker,
              "--input-topic", settings.input_topic, "--partitions", str(PARTITIONS)]
    if name == "gateway":
        return [sys.executable, "-m", "stream.cli", "gateway", "--url", url, "--store",
                str(store), *common]
    return [sys.executable, "-m", "stream.cli", "follow-sqlite", str(store), *common]


def run_one(name: str, broker: RunningBroker, seconds: float, workdir: Path,
            log: Callable[[str], None]) -> dict:
    tag = f"lat{name.replace('_', '')}-{uuid.uuid4().hex[:6]}"
    work = workdir / tag
    store = work / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    store.parent.mkdir(parents=True)
    commits_log, go = work / "commits.tsv", work / "go"
    input_topic = f"{tag}-in"
    settings = worker_settings(broker.url, tag, input_topic, workdir,
                               session_timeout=float(E2E_SESSION_TIMEOUT_S))
    # All made here, so that the consumers below can start before the worker makes its own.
    create(broker.bootstrap, [input_topic, *settings.output_topics])
    port = free_port()
    standin = Child("openclaw-standin", [
        sys.executable, "-m", "bench.openclaw_standin", "--store", str(store), "--port",
        str(port), "--log", str(commits_log), "--go", str(go), "--rate", str(RATE),
        "--sessions", str(SESSIONS), "--seconds", str(seconds)], work / "standin.log",
        python_env())
    env = {**python_env(), "OPENCLAW_GATEWAY_TOKEN": "bench"}
    children = [standin]
    idle: float | None = None
    clean = Arrivals(broker.bootstrap, settings.clean_topic)
    raw = Arrivals(broker.bootstrap, settings.input_topic)
    try:
        standin.start()
        problem = _wait(lambda: len(_commits(commits_log)[0]) >= SESSIONS, 30, children)
        if problem is None:
            children.append(Child("worker", worker_command(), work / "worker.log",
                                  settings.environment()).start())
            children.append(Child(name, _source_command(name, store, f"ws://127.0.0.1:{port}",
                                                        settings, work), work / "source.log",
                                  env).start())
            clean.start()
            raw.start()
            log(f"  source latency {name}: waiting for the sessions' headers to come through")
            problem = _wait(lambda: len(clean.arrived) >= SESSIONS, READY_TIMEOUT, children)
        if problem is None:
            go.touch()
            log(f"  source latency {name}: {RATE:.0f} rows/s over {SESSIONS} sessions for "
                f"{seconds:.0f}s")

            def through() -> bool:
                commits, done = _commits(commits_log)
                return done and all(entry in clean.arrived for entry in commits)

            problem = _wait(through, seconds + 60, children)
        if problem is None:
            idle = _idle_cpu(children[-1].pid)
    finally:
        clean.stop()
        raw.stop()
        for child in reversed(children):
            child.stop()
    result = _result(commits_log, clean, raw, idle, problem)
    raw_p99 = result["to_input_topic"].get("p99_ms", 0)
    log(f"    -> p50 {result.get('p50_ms', 0):.0f} ms, p99 {result.get('p99_ms', 0):.0f} ms "
        f"(to the input topic: p99 {raw_p99:.0f} ms; rows with no event: p99 "
        f"{result['no_event'].get('p99_ms', 0):.0f} ms); idle "
        f"{(result.get('idle_cpu_share') or 0) * 100:.2f} % of a core"
        if "p99_ms" in result else f"    -> {result.get('error')}")
    return result


def _result(commits_log: Path, clean: Arrivals, raw: Arrivals, idle: float | None,
            problem: str | None) -> dict:
    custom: set[str] = set()
    commits, _ = _commits(commits_log, custom)
    timed = {e: at for e, at in commits.items() if "-" in e.removeprefix("bench-")}
    latencies = _latencies(timed, clean.arrived)
    result: dict = {"rows": len(timed), "arrived": len(latencies), **latency_summary(latencies)}
    unannounced = {e: at for e, at in timed.items() if e in custom}
    result["no_event"] = {"rows": len(unannounced),
                          **latency_summary(_latencies(unannounced, clean.arrived))}
    if idle is not None:
        result["idle_cpu_share"] = idle
    # The same to the input topic: what the source takes, apart from the worker.
    result["to_input_topic"] = latency_summary(_latencies(timed, raw.arrived))
    if problem is not None:
        result["error"] = problem[-1500:]
    span = [at for at in timed.values()]
    if len(span) >= 2:
        result["rows_per_s"] = (len(span) - 1) / ((max(span) - min(span)) / 1e9)
    return result


def _idle_cpu(pid: int) -> float | None:
    """The share of a core the source used while the store was idle (after a settling second:
    the last acknowledgements and checkpoint writes)."""
    time.sleep(1.0)
    before, start = cpu_seconds(pid), time.monotonic()
    time.sleep(IDLE_SECONDS)
    after = cpu_seconds(pid)
    if before is None or after is None:
        return None
    return (after - before) / (time.monotonic() - start)


def _latencies(commits: dict[str, int], arrived: dict[str, int]) -> list[float]:
    return sorted((arrived[e] - at) / 1e6 for e, at in commits.items() if e in arrived)


def latency_summary(latencies: list[float]) -> dict:
    if len(latencies) < 100:
        return {}
    cuts = statistics.quantiles(latencies, n=100)
    return {"p50_ms": cuts[49], "p99_ms": cuts[98], "max_ms": latencies[-1],
            "mean_ms": statistics.fmean(latencies)}


def run(broker: RunningBroker, seconds: float, workdir: Path,
        log: Callable[[str], None]) -> dict:
    return {
        "rate_rows_per_s": RATE,
        "sessions": SESSIONS,
        "seconds": seconds,
        "how": "bench/openclaw_standin.py commits rows into an OpenClaw-schema store and emits "
               "the matching session.message events, none for the custom row every third row "
               "is (a real gateway cannot make 200 turns/s here); latency = clean-topic "
               "receive time - commit time; idle_cpu_share = the source's CPU over "
               f"{IDLE_SECONDS:.0f} s of an idle store",
        **{name: run_one(name, broker, seconds, workdir, log) for name in SOURCES},
    }


def main() -> None:
    """`python -m bench.source_latency [tansu|kafka] [SECONDS]`: this section alone, on a broker
    of its own, printed as JSON (the full run's other sections take minutes)."""
    print_alone(run, sys.argv[1] if len(sys.argv) > 1 else "tansu",
                float(sys.argv[2]) if len(sys.argv) > 2 else 10.0)

if __name__ == "__main__":
    main()
