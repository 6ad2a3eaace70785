"""`session-stream dev`: the whole pipeline on this machine, for a first look.

Starts the embedded Tansu broker on a loopback port (unless SESSION_STREAM_BROKER names
one), a worker, publishes the bundled example sessions and prints what comes out on the
clean, alert and dead-letter topics until Ctrl-C; then stops everything it started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson

from stream.brokers import RunningBroker, free_port, start_broker
from stream.brokers.local import die_with_parent_hook
from stream.consumers.consume import consume
from stream.consumers.memory_writer.compare import duplicate_line_report, format_report
from stream.consumers.memory_writer.files import MemoryWriter
from stream.consumers.memory_writer.sink import MemorySink
from stream.consumers.tail import format_record, record_time
from stream.kafka.consumer import make_consumer, topic_partitions
from stream.settings import ENV_PREFIX, Settings, add_options
from stream.sources.produce import produce_files

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sessions"
# How long the outputs must stay unchanged before the memory files are compared.
QUIET_SECONDS = 3.0
SHOWN_LINES = 24  # of the memory file shown before the raw-vs-clean table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help=f"session files or folders to publish (default: {EXAMPLES.name})")
    parser.add_argument("--until-idle", type=float, metavar="SECONDS",
                        help="exit once nothing new came out for this long (default: run until "
                        "Ctrl-C)")
    add_options(parser)


def main(args: argparse.Namespace) -> int:
    # SIGTERM stops it as Ctrl-C does: the worker first, then the broker it needs to stop
    # cleanly (with the broker gone first, a worker waits out its client's timeouts on it).
    signal.signal(signal.SIGTERM, _interrupt)
    settings = Settings.load(args)
    broker: RunningBroker | None = None
    if args.broker is None and ENV_PREFIX + "BROKER" not in os.environ:
        print("starting the embedded Tansu broker ...", file=sys.stderr)
        broker = start_broker("tansu")
        settings = settings.replace(broker=broker.url)
    if args.web_port is None and ENV_PREFIX + "WEB_PORT" not in os.environ:
        settings = settings.replace(web_port=free_port())
    worker = _start_worker(settings)
    try:
        return asyncio.run(_demo(settings, args.paths or [str(EXAMPLES)], args.until_idle))
    except KeyboardInterrupt:
        return 0
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
        if broker is not None:
            broker.stop()
        print("stopped the worker" + (" and the broker" if broker else ""), file=sys.stderr)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _start_worker(settings: Settings) -> subprocess.Popen:
    log_dir = Path(settings.data_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / "worker.log"
    env = settings.environment()
    print(f"starting a worker on {settings.broker} (log: {log_path}, stats: "
          f"http://{settings.web_host}:{settings.web_port}/stats)", file=sys.stderr)
    with log_path.open("ab") as log:
        return subprocess.Popen([sys.executable, "-m", "stream.cli", "worker"], env=env,
                                stdout=log, stderr=subprocess.STDOUT,
                                # a Ctrl-C reaches dev alone, which stops the worker itself;
                                # a dev killed outright takes the worker with it (Linux)
                                start_new_session=True,
                                preexec_fn=die_with_parent_hook())  # noqa: PLW1509 - the hook


async def _demo(settings: Settings, paths: list[str], until_idle: float | None) -> int:
    await _wait_for_worker(settings)
    report = await produce_files(settings, paths)
    print(report.summary(settings.input_topic), file=sys.stderr)
    await _watch(settings, until_idle, lambda: _compare_memory(settings))
    return 0


async def _compare_memory(settings: Settings) -> None:
    """The proof: the same sessions written to memory files from the raw topic and from the
    clean one, with their duplicate lines side by side."""
    folders = {}
    for name, topic in (("raw", settings.input_topic), ("clean", settings.clean_topic)):
        folder = Path(settings.data_dir) / "memory" / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.parent.mkdir(parents=True, exist_ok=True)
        group = f"{settings.app_id}-dev-{name}-{os.getpid()}-{time.time_ns()}"
        await consume(settings, topic, MemorySink(MemoryWriter(folder)), group, follow=False)
        folders[name] = folder
    report = duplicate_line_report(folders["raw"], folders["clean"])
    _show_memory_file(folders["clean"], report)
    print(f"memory files written from the raw and the clean topic ({folders['raw'].parent}):",
          file=sys.stderr)
    print(format_report(report), file=sys.stderr)


def _show_memory_file(folder: Path, report: dict) -> None:
    """One clean memory file as OpenClaw's memory would index it: the session whose raw file
    repeats most lines."""
    sessions = report["sessions"]
    if not sessions:
        return
    name = max(sessions, key=lambda n: (sessions[n]["raw_duplicates"], n))
    path = folder / f"{name}.md"
    lines = path.read_text(errors="replace").splitlines()
    shown = lines[:SHOWN_LINES] + ([f"  ... ({len(lines) - SHOWN_LINES} more lines)"]
                                   if len(lines) > SHOWN_LINES else [])
    print(f"the memory file of one session, from the clean topic ({path}):", file=sys.stderr)
    print("\n".join(f"  | {line}" for line in shown), file=sys.stderr)


async def _wait_for_worker(settings: Settings, timeout: float = 120.0) -> None:
    """The worker serves its stats page once it has joined the group and recovered."""
    url = f"http://{settings.web_host}:{settings.web_port}/stats"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            await asyncio.to_thread(urllib.request.urlopen, url, timeout=2)
            return
        except OSError:
            await asyncio.sleep(0.5)
    raise TimeoutError(f"the worker did not start within {timeout:g}s; see its log")


async def _watch(settings: Settings, until_idle: float | None,
                 when_quiet: Callable[[], Awaitable[None]]) -> None:
    """Print what comes out; the first time nothing new came for a few seconds, `when_quiet`."""
    roles = {settings.clean_topic: "clean", settings.alerts_topic: "alerts",
             settings.dlq_topic: "dlq"}
    consumer = make_consumer(settings)
    await consumer.start()
    counts: Counter[str] = Counter()
    alerts: Counter[str] = Counter()
    try:
        # The worker creates the output topics as it starts.
        consumer.assign(await topic_partitions(consumer, list(roles), wait=True))
        await consumer.seek_to_beginning()
        # Idleness counts from the first output: the worker may still be joining its group.
        last_news: float | None = None
        quiet_done = False
        while until_idle is None or last_news is None or time.monotonic() - last_news < until_idle:
            if not quiet_done and last_news and time.monotonic() - last_news >= QUIET_SECONDS:
                quiet_done = True
                await when_quiet()
            batch = await consumer.getmany(timeout_ms=500)
            for tp, records in batch.items():
                role = roles[tp.topic]
                counts[role] += len(records)
                for record in records:
                    if role != "clean":
                        print(record_time(record), format_record(role, record))
                    if role == "alerts":
                        alerts[_kind(record.value)] += 1
            if batch:
                last_news = time.monotonic()
                print(_summary(counts, alerts), file=sys.stderr)
    finally:
        await consumer.stop()


def _kind(value: bytes | None) -> str:
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        return orjson.loads(value).get("kind", "?")
    return "?"


def _summary(counts: Counter[str], alerts: Counter[str]) -> str:
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(alerts.items()))
    return (f"-- clean {counts['clean']} | alerts {counts['alerts']} ({kinds}) | "
            f"dead letters {counts['dlq']}")
