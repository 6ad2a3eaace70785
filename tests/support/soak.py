"""Soak: a long stream over a sliding population of sessions with a short TTL, watching the
worker's RSS and table size level off (issue 5, item 6).

    python -m tests.support.soak [--entries 1000000] [--sessions 100000] [--ttl 20] [--sweep 5]
                               [--broker tansu|kafka] [--sample 5] [--out FILE]

Sessions are active for a short stretch of the stream and never seen again: `--active` of
them at a time, each replaced by a new one when its last entry was sent. Idle sessions pass
the TTL and the worker's sweep forgets them, so in steady state its tables hold only the
sessions seen within about ttl + sweep seconds, whatever the total.

The producer stays at most `--ahead` records ahead of the worker's `entries_in` (and under
`--rate` records/s when given), so what is measured is the worker's steady state, not a
backlog. Every `--sample` seconds a point (elapsed, entries_in, rss_mb, sessions_keys,
memory_keys) is recorded. After the stream the worker has drained, a tick session keeps
batches (and so sweeps) going for `--tail` seconds, which should empty the tables of
everything but itself.

Exit status 0 when RSS and the tables levelled off (see `analyse`), 1 when not.
The broker is SESSION_STREAM_BROKER when set (left running), else a fresh one of `--broker`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import tempfile
import time
from array import array
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace

import orjson

from stream.brokers import RunningBroker, start_broker
from stream.kafka.admin import ensure_input_topic
from stream.kafka.producer import make_producer, send_records
from stream.settings import Settings
from tests.support.harness import WorkerProcess, worker_settings

FORGOT = re.compile(rb"forgot (\d+) sessions idle")
TICK_SESSION = "soak-tick"
WORDS = (
    "deploy", "build", "cache", "index", "query", "schema", "latency", "replica", "token",
    "branch", "commit", "review", "metric", "trace", "worker", "broker", "partition", "offset",
    "session", "memory", "table", "sweep", "retry", "budget", "config", "backup", "restore",
)


@dataclass
class SoakConfig:
    entries: int = 1_000_000
    sessions: int = 100_000
    ttl: float = 20.0
    sweep: float = 5.0
    broker: str = "tansu"
    sample: float = 5.0
    active: int = 1000  # sessions streaming at once
    ahead: int = 10_000  # most records produced but not yet processed
    rate: float = 0.0  # records/s; 0: as fast as the worker keeps up
    tail: float | None = None  # seconds of ticks after the drain; None: ttl + 2 sweeps + sample
    batch_size: int = 1000
    drain_timeout: float = 300.0
    seed: int = 5
    out: str | None = None
    workdir: str | None = None
    quiet: bool = False


@dataclass
class Sample:
    elapsed: float
    phase: str  # "stream" while records are produced, "drain", then "tail"
    produced: int
    entries_in: int
    rss_mb: float
    sessions_keys: int
    memory_keys: int
    # distinct sessions (and entries) the worker processed within ttl + sweep + sample before
    # this point: what its tables may hold at most once the TTL works
    live_bound: int
    live_entries: int


@dataclass
class SoakResult:
    config: SoakConfig
    samples: list[Sample] = field(default_factory=list)
    produced: int = 0
    entries_in: int = 0
    seconds: float = 0.0
    forgotten: int = 0  # sessions the worker logged as forgotten
    restarts: int = 0
    verdict: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        return {
            "config": asdict(self.config),
            "produced": self.produced,
            "entries_in": self.entries_in,
            "seconds": round(self.seconds, 1),
            "forgotten": self.forgotten,
            "restarts": self.restarts,
            "verdict": self.verdict,
            "samples": [asdict(s) for s in self.samples],
        }


# --- the workload -----------------------------------------------------------------------------

def _stamp(n: int) -> str:
    seconds = 1_775_000_000 + n
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{n % 1000:03d}Z"


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def session_entries(number: int, length: int) -> Iterator[bytes]:
    """`length` OpenClaw lines of one synthetic session: the header, then turns of user,
    assistant with a tool call, tool result, assistant reply, chained by parentId. Texts
    carry the session and turn so that no entry is a duplicate of another."""
    rng = random.Random(number)
    sid = f"soak-{number:07d}"
    yield orjson.dumps({"type": "session", "version": 3, "id": sid, "timestamp": _stamp(number),
                        "cwd": "/home/openclaw"})
    parent: str | None = None
    for j in range(1, length):
        eid = f"{number:07x}{j:04x}"
        turn, step = divmod(j - 1, 4)
        base = {"type": "message", "id": eid, "parentId": parent,
                "timestamp": _stamp(number + j)}
        call = f"call_{number:x}_{turn}"
        if step == 0:
            text = f"[{sid} turn {turn}] {_prose(rng, 25)}"
            message = {"role": "user", "content": [{"type": "text", "text": text}]}
        elif step == 1:
            message = {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Checking {turn}: {_prose(rng, 12)}"},
                    {"type": "toolCall", "id": call, "name": "exec",
                     "arguments": {"cmd": f"grep -rn {rng.choice(WORDS)} src/"}},
                ],
                "api": "anthropic-messages", "provider": "anthropic",
                "model": "claude-opus-4-5", "stopReason": "toolUse",
                "usage": {"input": 1200 + j, "output": 40 + turn, "cacheRead": 0,
                          "totalTokens": 1240 + j + turn},
            }
        elif step == 2:
            message = {"role": "toolResult", "toolCallId": call, "toolName": "exec",
                       "isError": False,
                       "content": [{"type": "text", "text": f"src/{turn}.py: {_prose(rng, 20)}"}]}
        else:
            message = {
                "role": "assistant",
                "content": [{"type": "text", "text": f"[{sid} reply {turn}] {_prose(rng, 30)}"}],
                "api": "anthropic-messages", "provider": "anthropic",
                "model": "claude-opus-4-5", "stopReason": "stop",
                "usage": {"input": 1300 + j, "output": 90 + turn, "cacheRead": 0,
                          "totalTokens": 1390 + j + turn},
            }
        yield orjson.dumps({**base, "message": message})
        parent = eid


def sliding_stream(entries: int, sessions: int, active: int, seed: int,
                   owners: array) -> Iterator[tuple[bytes, bytes]]:
    """(key, line) records: `active` sessions interleaved at random, each replaced by the next
    new session when its last entry is out, so every session lives for a stretch of the
    stream and is never seen again. Appends each record's session number to `owners`."""
    rng = random.Random(seed)
    base, extra = divmod(entries, sessions)
    started = 0
    slots: list[tuple[int, bytes, Iterator[bytes]]] = []

    def begin() -> None:
        nonlocal started
        length = base + (1 if started < extra else 0)
        slots.append((started, f"soak-{started:07d}".encode(), session_entries(started, length)))
        started += 1

    while started < sessions and len(slots) < active:
        begin()
    while slots:
        i = rng.randrange(len(slots))
        number, key, lines = slots[i]
        line = next(lines, None)
        if line is None:
            slots[i] = slots[-1]
            slots.pop()
            if started < sessions:
                begin()
            continue
        owners.append(number)
        yield key, line


def tick_entries() -> Iterator[tuple[bytes, bytes]]:
    """An endless session that keeps the worker's batches, and so its sweeps, going."""
    key = TICK_SESSION.encode()
    yield key, orjson.dumps({"type": "session", "version": 3, "id": TICK_SESSION,
                             "timestamp": _stamp(0), "cwd": "/home/openclaw"})
    parent = None
    for n in range(10**9):
        eid = f"tick{n:08x}"
        yield key, orjson.dumps({"type": "message", "id": eid, "parentId": parent,
                                 "timestamp": _stamp(n), "message": {
                                     "role": "user",
                                     "content": [{"type": "text", "text": f"tick {n}"}]}})
        parent = eid


# --- measuring --------------------------------------------------------------------------------

def rss_mb(pid: int) -> float:
    """VmRSS of a process in MiB; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


class Progress:
    """The worker's progress over time: answers 'how far had it got at time t'."""

    def __init__(self) -> None:
        self.points: list[tuple[float, int]] = [(0.0, 0)]

    def add(self, elapsed: float, entries_in: int) -> None:
        if entries_in >= self.points[-1][1]:
            self.points.append((elapsed, entries_in))

    def at(self, elapsed: float) -> int:
        best = 0
        for t, n in self.points:  # short enough: one point per poll, scanned per sample
            if t > elapsed:
                break
            best = n
        return best


def live_window(owners: array, progress: Progress, now: float, window: float,
                entries_in: int) -> tuple[int, int]:
    """(distinct sessions, entries) the worker processed within `window` seconds before
    `now`, the tick session and its entries included."""
    start = progress.at(now - window)
    end = min(entries_in, len(owners))
    sessions = len(set(owners[min(start, end):end])) + 1
    return sessions, max(0, entries_in - start)


# --- running ----------------------------------------------------------------------------------

class Soak:
    def __init__(self, config: SoakConfig, settings: Settings, worker: WorkerProcess) -> None:
        self.config = config
        self.settings = settings
        self.worker = worker
        self.result = SoakResult(config)
        self.owners = array("I")
        self.progress = Progress()
        self.started = time.monotonic()
        self.next_sample = 0.0
        self.entries_in = 0
        self.base_entries = 0  # entries_in of workers before a restart
        self.stats: dict = {}
        self.produced = 0
        self.phase = "stream"

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    async def poll(self) -> None:
        process = self.worker.process
        if process is not None and process.poll() is not None:
            if process.returncode == 3:  # stalled: restart it as a supervisor would
                self.result.restarts += 1
                self.base_entries = self.entries_in
                self.log("worker exited for a restart (code 3); restarting")
                await asyncio.to_thread(self.worker.start)
            else:
                raise RuntimeError(f"worker exited {process.returncode}:\n"
                                   f"{self.worker.log_tail()}")
        stats = await asyncio.to_thread(self.worker.stats)
        if stats is not None:
            self.stats = stats
            self.entries_in = self.base_entries + stats.get("entries_in", 0)
            self.progress.add(self.elapsed(), self.entries_in)
        now = self.elapsed()
        if now >= self.next_sample:
            self.next_sample = now + self.config.sample
            self.take_sample(now)

    def take_sample(self, now: float) -> None:
        keys = self.stats.get("table_keys", {})
        window = self.config.ttl + self.config.sweep + self.config.sample
        bound, entries = live_window(self.owners, self.progress, now, window, self.entries_in)
        sample = Sample(
            elapsed=round(now, 1),
            phase=self.phase,
            produced=self.produced,
            entries_in=self.entries_in,
            rss_mb=round(rss_mb(self.worker.process.pid), 1),
            sessions_keys=keys.get("sessions", 0),
            memory_keys=keys.get("memory", 0),
            live_bound=bound,
            live_entries=entries,
        )
        self.result.samples.append(sample)
        self.log(f"{sample.elapsed:7.1f}s {sample.phase:6} produced {sample.produced:>8} "
                 f"in {sample.entries_in:>8}  rss {sample.rss_mb:6.1f} MB  "
                 f"sessions {sample.sessions_keys:>7} (bound {sample.live_bound:>7})  "
                 f"memory {sample.memory_keys:>8}")

    def log(self, text: str) -> None:
        if not self.config.quiet:
            print(text, file=sys.stderr, flush=True)

    async def run(self) -> SoakResult:
        config = self.config
        producer = make_producer(self.settings)
        await producer.start()
        try:
            records = sliding_stream(config.entries, config.sessions, config.active,
                                     config.seed, self.owners)
            await self.stream(producer, records)
            self.phase = "drain"
            await self.drain()
            self.phase = "tail"
            await self.ticks(producer)
            await self.drain()
        finally:
            await producer.stop()
        await self.poll()
        self.take_sample(self.elapsed())
        result = self.result
        result.produced, result.entries_in = self.produced, self.entries_in
        result.seconds = self.elapsed()
        return result

    async def stream(self, producer, records: Iterator[tuple[bytes, bytes]]) -> None:
        config, topic = self.config, self.settings.input_topic
        last_poll = -1.0
        exhausted = False
        while not exhausted:
            if self.elapsed() - last_poll >= 0.25:
                await self.poll()
                last_poll = self.elapsed()
            room = self.entries_in + config.ahead - self.produced
            if config.rate > 0:
                room = min(room, int(config.rate * self.elapsed()) - self.produced)
            if room <= 0:
                await asyncio.sleep(0.1)
                continue
            chunk = []
            for record in records:
                chunk.append(record)
                if len(chunk) >= min(room, 2000):
                    break
            else:
                exhausted = True
            self.produced += await send_records(producer, topic, chunk)

    async def drain(self) -> None:
        deadline = self.elapsed() + self.config.drain_timeout
        while self.entries_in < self.produced:
            if self.elapsed() > deadline:
                raise TimeoutError(f"worker processed {self.entries_in} of {self.produced} "
                                   f"records after {self.config.drain_timeout}s:\n"
                                   f"{self.worker.log_tail()}")
            await asyncio.sleep(0.25)
            await self.poll()

    async def ticks(self, producer) -> None:
        config = self.config
        tail = config.tail if config.tail is not None else (
            config.ttl + 2 * config.sweep + config.sample)
        end = self.elapsed() + tail
        ticks = tick_entries()
        while self.elapsed() < end:
            self.produced += await send_records(producer, self.settings.input_topic,
                                                [next(ticks)])
            await asyncio.sleep(0.25)
            await self.poll()


def run_soak(config: SoakConfig, broker: RunningBroker | None = None) -> SoakResult:
    """The whole soak; uses `broker` when given (and leaves it running), else
    SESSION_STREAM_BROKER, else starts (and stops) a broker of `config.broker`."""
    own_broker = None
    if broker is None:
        url = os.environ.get("SESSION_STREAM_BROKER")
        if url:
            broker = SimpleNamespace(url=url)
        else:
            broker = own_broker = start_broker(config.broker)
    with tempfile.TemporaryDirectory(prefix="session-stream-soak-") as scratch:
        workdir = Path(config.workdir or scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        name = f"soak{os.getpid()}x{int(time.time())}"
        settings = worker_settings(
            broker, name, workdir,
            session_ttl=config.ttl, ttl_sweep_interval=config.sweep,
            batch_size=config.batch_size,
        ).replace(stall_timeout=120.0)  # the harness's 20 s is short on a loaded box
        log_path = workdir / "worker.log"
        worker = WorkerProcess(settings, log_path)
        try:
            ensure_input_topic(settings)
            worker.start()
            soak = Soak(config, settings, worker)
            result = asyncio.run(soak.run())
        except BaseException:
            print(f"worker log (tail):\n{worker.log_tail()}", file=sys.stderr)
            raise
        finally:
            if worker.process is not None:
                worker.stop()
            if own_broker is not None:
                own_broker.stop()
        result.forgotten = sum(int(n) for n in FORGOT.findall(log_path.read_bytes()))
    result.verdict = analyse(result)
    return result


# --- judging and showing ----------------------------------------------------------------------

# Each entry leaves at most its id, a tool call and an idempotency key in the memory table.
MEMORY_KEYS_PER_ENTRY = 3


def analyse(result: SoakResult, tolerance: float = 0.10) -> dict:
    """Levelled off, over the streaming samples: RSS, in that the highest point of the last
    third is within `tolerance` of the highest of the middle third; the tables, in that the
    sessions table never held more than (1 + tolerance) times the sessions the worker
    processed within ttl + sweep + a sample, nor the memory table more than
    MEMORY_KEYS_PER_ENTRY keys per entry processed within it. (Their sizes follow the
    throughput, which a shared box varies; their middle/last-third growth is reported too.)"""
    stream = [s for s in result.samples if s.phase == "stream"]
    verdict: dict = {"samples": len(stream)}
    if len(stream) < 6:
        verdict.update(levelled_off=None, reason="fewer than 6 samples while streaming")
        return verdict
    n = len(stream)
    middle, last = stream[n // 3: 2 * n // 3], stream[2 * n // 3:]
    for name in ("rss_mb", "sessions_keys", "memory_keys"):
        peak_middle = max(getattr(s, name) for s in middle)
        peak_last = max(getattr(s, name) for s in last)
        growth = (peak_last - peak_middle) / peak_middle if peak_middle else 0.0
        verdict[name] = {"middle_max": peak_middle, "last_max": peak_last,
                         "growth": round(growth, 3), "ok": growth <= tolerance}
    sessions_ratio = max(s.sessions_keys / max(1, s.live_bound) for s in stream)
    verdict["sessions_bounded"] = {"worst_ratio": round(sessions_ratio, 3),
                                   "ok": sessions_ratio <= 1 + tolerance}
    memory_ratio = max(s.memory_keys / max(1, s.live_entries) for s in stream)
    verdict["memory_bounded"] = {"worst_keys_per_entry": round(memory_ratio, 3),
                                 "ok": memory_ratio <= MEMORY_KEYS_PER_ENTRY}
    verdict["levelled_off"] = all(
        verdict[k]["ok"] for k in ("rss_mb", "sessions_bounded", "memory_bounded"))
    return verdict


def sparkline(values: list[float], width: int = 60) -> str:
    """An ASCII sparkline from 0 to the maximum, averaged into at most `width` columns."""
    levels = " _.-~=+*#@"
    if not values:
        return ""
    step = max(1, -(-len(values) // width))
    columns = [sum(values[i:i + step]) / len(values[i:i + step])
               for i in range(0, len(values), step)]
    top = max(columns) or 1
    return "".join(levels[min(len(levels) - 1, round(v / top * (len(levels) - 1)))]
                   for v in columns)


def report(result: SoakResult) -> str:
    config = result.config
    lines = [
        f"soak: {result.produced} records ({config.entries} entries over {config.sessions} "
        f"sessions, {config.active} active at a time, + ticks) in {result.seconds:.0f}s; "
        f"ttl {config.ttl:g}s, sweep {config.sweep:g}s; worker processed {result.entries_in}, "
        f"forgot {result.forgotten} sessions, restarts {result.restarts}",
        "",
        f"{'elapsed':>8} {'phase':>6} {'entries_in':>10} {'rss_mb':>7} {'sessions':>9} "
        f"{'bound':>7} {'memory':>9} {'window':>7}",
    ]
    lines += [
        f"{s.elapsed:>8.1f} {s.phase:>6} {s.entries_in:>10} {s.rss_mb:>7.1f} "
        f"{s.sessions_keys:>9} {s.live_bound:>7} {s.memory_keys:>9} {s.live_entries:>7}"
        for s in result.samples
    ]
    lines.append("")
    for name in ("rss_mb", "sessions_keys", "memory_keys"):
        values = [getattr(s, name) for s in result.samples]
        lines.append(f"{name:>13} |{sparkline(values)}| max {max(values, default=0):g}")
    lines.append("")
    verdict = result.verdict
    if verdict.get("levelled_off") is None:
        lines.append(f"levelled off: unknown ({verdict.get('reason')})")
    else:
        for name in ("rss_mb", "sessions_keys", "memory_keys"):
            v = verdict[name]
            judged = ("ok" if v["ok"] else "GROWING") if name == "rss_mb" else "(info)"
            lines.append(f"{name}: max of the middle third {v['middle_max']:g}, of the last "
                         f"third {v['last_max']:g} ({v['growth']:+.1%}) {judged}")
        sessions, memory = verdict["sessions_bounded"], verdict["memory_bounded"]
        lines.append(f"sessions table / sessions processed within ttl+sweep+sample: worst "
                     f"{sessions['worst_ratio']:g} {'ok' if sessions['ok'] else 'OVER'}")
        lines.append(f"memory table / entries processed within it: worst "
                     f"{memory['worst_keys_per_entry']:g} (at most {MEMORY_KEYS_PER_ENTRY}) "
                     f"{'ok' if memory['ok'] else 'OVER'}")
        lines.append(f"levelled off: {'yes' if verdict['levelled_off'] else 'NO'}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> SoakConfig:
    defaults = SoakConfig()
    parser = argparse.ArgumentParser(prog="python -m tests.support.soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=defaults.entries)
    parser.add_argument("--sessions", type=int, default=defaults.sessions)
    parser.add_argument("--ttl", type=float, default=defaults.ttl, help="session TTL (s)")
    parser.add_argument("--sweep", type=float, default=defaults.sweep,
                        help="TTL sweep interval (s)")
    parser.add_argument("--broker", choices=("tansu", "kafka"),
                        default=os.environ.get("SESSION_STREAM_TEST_BROKER", defaults.broker),
                        help="broker to start unless SESSION_STREAM_BROKER names one")
    parser.add_argument("--sample", type=float, default=defaults.sample,
                        help="seconds between samples")
    parser.add_argument("--active", type=int, default=defaults.active,
                        help="sessions streaming at once")
    parser.add_argument("--ahead", type=int, default=defaults.ahead,
                        help="most records produced beyond the worker's entries_in")
    parser.add_argument("--rate", type=float, default=defaults.rate,
                        help="records/s cap (0: as fast as the worker keeps up)")
    parser.add_argument("--tail", type=float, default=None,
                        help="seconds of ticks after the drain (default ttl + 2 sweeps + sample)")
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--out", help="write the curve and verdict as JSON here")
    parser.add_argument("--workdir", help="keep the worker's data and log here")
    args = parser.parse_args(argv)
    if args.sessions <= 0 or args.entries < args.sessions:
        parser.error("need 0 < --sessions <= --entries")
    return SoakConfig(
        entries=args.entries, sessions=args.sessions, ttl=args.ttl, sweep=args.sweep,
        broker=args.broker, sample=args.sample, active=min(args.active, args.sessions),
        ahead=args.ahead, rate=args.rate, tail=args.tail, batch_size=args.batch_size,
        seed=args.seed, out=args.out, workdir=args.workdir,
    )


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    result = run_soak(config)
    print(report(result))
    if config.out:
        Path(config.out).write_text(json.dumps(result.as_json(), indent=1) + "\n")
    return 0 if result.verdict.get("levelled_off") else 1


if __name__ == "__main__":
    sys.exit(main())
