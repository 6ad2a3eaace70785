"""Where the time goes (section 8): the engine under cProfile, the worker under py-spy.

The worker runs as in the end-to-end benchmark, sampled by py-spy (native frames on, so time in
orjson and hashing shows as such; idle threads are not sampled). Without py-spy it runs under
`python -m cProfile`. Samples are summed per function (self and inclusive) and per category, the
category of a sample being that of its innermost frame that matches one (see CATEGORIES).
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import shutil
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.core import engine_all, numbered
from bench.procs import (
    PARTITIONS,
    Child,
    committed,
    worker_command,
    worker_settings,
)
from bench.workload import Entry
from stream.brokers import RunningBroker

TOP = 15
SAMPLE_RATE = 200

# (category, substrings of a frame as py-spy names it: "function (package/module.py:line)");
# the innermost frame with a match decides.
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("json (orjson, json)", ("orjson", "json/", "_json")),
    ("hashing (blake2b)", ("blake2", "hashlib")),
    ("logging", ("logging/",)),
    ("engine", ("stream/engine/",)),
    ("worker batch + state store", ("stream/worker/", "stream/accounting")),
    ("faust tables + changelog", ("faust/tables/", "faust/stores/")),
    ("faust sensors/monitor", ("faust/sensors/",)),
    ("faust producer buffer", ("faust/transport/producer",)),
    ("faust streams, agents, topics, events", (
        "faust/streams", "faust/agents/", "faust/channels", "faust/topics", "faust/events",
        "faust/app/", "faust/serializers/", "faust/types/", "faust/utils/")),
    ("faust consumer/driver", ("faust/transport/",)),
    ("aiokafka producer", ("aiokafka/producer/",)),
    ("aiokafka consumer/fetcher", ("aiokafka/consumer/",)),
    ("aiokafka protocol/records/conn", ("aiokafka/",)),
    ("mode + asyncio event loop", ("mode/", "asyncio/", "selectors", "threading")),
)
# Samples of threads waiting (py-spy's native mode samples idle threads too) and of start-up.
IDLE_MARKERS = ("select_epoll_poll", "EpollSelector.select", "epoll_wait", "Condition.wait",
                "pthread_cond_wait", "pthread_cond_timedwait", "sem_timedwait", "nanosleep",
                "Event.wait")
STARTUP_MARKERS = ("<frozen importlib", "_find_and_load", "_call_with_frames_removed",
                   "create_default_context")


def engine_profile(workload: Sequence[Entry]) -> dict:
    items = numbered(workload)
    engine_all(items)  # warm-up
    profiler = cProfile.Profile()
    profiler.enable()
    engine_all(items)
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = []
    for (filename, line, function), (_, calls, tottime, cumtime, _) in stats.stats.items():
        if "bench/" in filename and "workload" not in filename:
            continue
        rows.append({
            "function": f"{function} ({_short(filename)}:{line})",
            "calls": calls,
            "self_us_per_entry": 1e6 * tottime / len(items),
            "inclusive_us_per_entry": 1e6 * cumtime / len(items),
        })
    return {
        "tool": "cProfile (deterministic; inflates many small calls)",
        "entries": len(items),
        "total_us_per_entry": 1e6 * stats.total_tt / len(items),
        "top_self": sorted(rows, key=lambda r: -r["self_us_per_entry"])[:TOP],
        "top_inclusive": sorted(rows, key=lambda r: -r["inclusive_us_per_entry"])[:TOP],
    }


def _short(filename: str) -> str:
    for marker in ("/site-packages/", "/stream/", "/lib/python3"):
        if marker in filename:
            tail = filename.split(marker, 1)[1]
            return ("stream/" + tail) if marker == "/stream/" else tail
    return filename


def categorize(frames: Sequence[str]) -> str:
    for frame in reversed(frames):
        for category, needles in CATEGORIES:
            if any(needle in frame for needle in needles):
                return category
    return "other"


def parse_collapsed(text: str) -> list[tuple[list[str], int]]:
    """py-spy's raw (collapsed) format: `frame;frame;...;leaf count` per line."""
    samples = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            samples.append((stack.split(";"), int(count)))
    return samples


_LOOP_FRAMES = ("asyncio/", "_asynciomodule", "mode/", "runpy", "stream/cli.py",
                "stream/worker/run.py", "threading.py", "Worker.execute_from_commandline",
                "selectors", "_contextvars", "builtins.__import__", "<module>")


def _task_of(frames: Sequence[str]) -> str:
    """The coroutine or callback the event loop was running: its first frame of its own."""
    for frame in frames:
        if frame.startswith("0x") or ".so" in frame or ".c:" in frame or ".h:" in frame:
            continue
        if not any(marker in frame for marker in _LOOP_FRAMES):
            return _short_frame(frame)
    return "(event loop itself)"


def _generic(frame: str) -> bool:
    """Frames every sample passes through (event loop, entry point, native glue)."""
    return (frame.startswith("0x") or ".so" in frame or ".c:" in frame or ".h:" in frame
            or any(marker in frame for marker in _LOOP_FRAMES))


def normalize(profile: dict, cpu_us_per_entry: float | None) -> None:
    """Restate a sampled profile's per-entry figures as shares of the CPU the worker used per
    entry when not sampled (py-spy's native mode slows the worker several times over)."""
    if not cpu_us_per_entry or "samples" not in profile:
        return
    profile["cpu_us_per_entry_sampled"] = profile["cpu_us_per_entry"]
    profile["cpu_us_per_entry"] = cpu_us_per_entry
    profile["normalized"] = "us_per_entry = share x the unprofiled worker's CPU per entry"
    for key in ("categories", "top_self", "top_inclusive"):
        for row in profile.get(key, []):
            row["us_per_entry"] = row["share"] * cpu_us_per_entry


def _agent_step(frames: Sequence[str]) -> str | None:
    """Within the worker's agent (stream/worker/app.py), the two calls below it."""
    for i, frame in enumerate(frames):
        if "stream/worker/app.py" in frame:
            below = [f.split(" (")[0] for f in frames[i + 1 :]
                     if not (f.startswith("0x") or ".so" in f or ".c:" in f or ".h:" in f)]
            return " > ".join(below[:2]) or frame.split(" (")[0]
    return None


def summarize_samples(samples: list[tuple[list[str], int]], entries: int,
                      rate: int = SAMPLE_RATE) -> dict:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    tasks: Counter[str] = Counter()
    agent: Counter[str] = Counter()
    startup = idle = 0
    for frames, count in samples:
        if any(marker in frame for frame in frames[-6:] for marker in IDLE_MARKERS):
            idle += count
            continue
        if any(marker in frame for frame in frames for marker in STARTUP_MARKERS):
            startup += count
            continue
        own[frames[-1]] += count
        for frame in set(frames):
            if not _generic(frame):
                inclusive[frame] += count
        categories[categorize(frames)] += count
        tasks[_task_of(frames)] += count
        step = _agent_step(frames)
        if step is not None:
            agent[step] += count
    active = sum(categories.values())

    def per_entry(count: int) -> float:
        return 1e6 * count / rate / entries if entries else 0.0

    def rows(counter: Counter[str]) -> list[dict]:
        return [{"function": _short_frame(frame), "share": count / active,
                 "us_per_entry": per_entry(count)} for frame, count in counter.most_common(TOP)]

    return {
        "samples": active,
        "startup_samples_excluded": startup,
        "idle_samples_excluded": idle,
        "sample_rate_hz": rate,
        "cpu_us_per_entry": per_entry(active),
        "categories": [{"category": c, "share": n / active, "us_per_entry": per_entry(n)}
                       for c, n in categories.most_common()] if active else [],
        "by_task": [{"task": t, "share": n / active} for t, n in tasks.most_common(TOP)]
        if active else [],
        "inside_worker_agent": [{"call": a, "share": n / active}
                                for a, n in agent.most_common(TOP)] if active else [],
        "top_self": rows(own) if active else [],
        "top_inclusive": rows(inclusive) if active else [],
    }


def _short_frame(frame: str) -> str:
    name, _, where = frame.partition(" (")
    return f"{name} ({_short(where.rstrip(')'))})" if where else frame


_CPROFILE_IDLE = ("of 'select.epoll' objects", "'acquire' of '_thread", "time.sleep",
                  "of '_thread.lock' objects")


def _pstats_summary(path: Path, entries: int) -> dict:
    """The same shape from a cProfile dump: wall time of the main thread, waits left out."""
    stats = pstats.Stats(str(path))
    categories: Counter[str] = Counter()
    rows = []
    for (filename, line, function), (_, calls, tottime, cumtime, _) in stats.stats.items():
        frame = f"{function} ({filename}:{line})"
        if any(marker in frame for marker in STARTUP_MARKERS + _CPROFILE_IDLE):
            continue
        categories[categorize([frame])] += tottime
        rows.append({"function": f"{function} ({_short(filename)}:{line})", "calls": calls,
                     "self_s": tottime, "inclusive_s": cumtime})
    total = sum(categories.values()) or 1.0
    for row in rows:
        row["share"] = row["self_s"] / total
        row["us_per_entry"] = 1e6 * row["self_s"] / entries
    inclusive = [dict(row, share=row["inclusive_s"] / total,
                      us_per_entry=1e6 * row["inclusive_s"] / entries) for row in rows
                 if not _generic(row["function"])]
    return {
        "samples": len(rows),
        "cpu_us_per_entry": 1e6 * total / entries,
        "categories": [{"category": c, "share": s / total, "us_per_entry": 1e6 * s / entries}
                       for c, s in categories.most_common()],
        "top_self": sorted(rows, key=lambda r: -r["self_s"])[:TOP],
        "top_inclusive": sorted(inclusive, key=lambda r: -r["inclusive_s"])[:TOP],
    }


def py_spy() -> str | None:
    candidate = Path(sys.executable).with_name("py-spy")
    return str(candidate) if candidate.exists() else shutil.which("py-spy")


def worker_profile(broker: RunningBroker, input_topic: str, total: int, workdir: Path,
                   log) -> dict:
    tag = f"profile-{uuid.uuid4().hex[:6]}"
    settings = worker_settings(broker.url, tag, input_topic, workdir)
    spy = py_spy()
    out = workdir / f"{tag}.{'txt' if spy else 'prof'}"
    if spy:
        cmd = worker_command()
    else:
        cmd = [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "stream.cli", "worker"]
    worker = Child("worker", cmd, workdir / f"{tag}.log", settings.environment()).start()
    sampler = None
    if spy:
        sampler = Child("py-spy", [spy, "record", "--pid", str(worker.pid), "--native",
                                   "--function", "--rate", str(SAMPLE_RATE), "--format", "raw",
                                   "--output", str(out)], workdir / f"{tag}-py-spy.log").start()
    log(f"  profile {broker.kind}: worker under {'py-spy' if spy else 'cProfile'}")
    error = None
    try:
        deadline = time.monotonic() + 120 + total / 1000
        while time.monotonic() < deadline and worker.alive():
            done = asyncio.run(committed(broker.bootstrap, settings.app_id, input_topic,
                                         range(PARTITIONS)))
            if done >= total:
                break
            time.sleep(0.5)
        else:
            error = f"worker did not finish: {worker.log_tail(10)}"
    finally:
        worker.stop()
        if sampler is not None:
            try:
                sampler.process.wait(30)
            except Exception:  # noqa: BLE001 - never leave the sampler running
                sampler.stop()
    result: dict = {"tool": "py-spy (sampling, native frames)" if spy
                    else "cProfile (main thread only, deterministic)", "entries": total}
    if error:
        result["error"] = error
    if not out.exists():
        result["error"] = f"no profile written: {(sampler or worker).log_tail(5)}"
        return result
    if spy:
        result.update(summarize_samples(parse_collapsed(out.read_text()), total))
    else:
        result.update(_pstats_summary(out, total))
    return result
