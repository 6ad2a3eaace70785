"""From a real OpenClaw's transcripts to the topics and back: a source command (`follow`,
`follow-sqlite`), the worker (tests/support/harness.py), the memory writer, and `session-stream
clean` over the same entries for comparison."""

from __future__ import annotations

import argparse
import asyncio
import io
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import orjson

from stream.brokers import RunningBroker
from stream.cli import main as session_stream
from stream.commands import follow, follow_sqlite
from stream.consumers.memory_writer.render import message_lines
from stream.consumers.tail import read_topic
from stream.engine import DROP_RULES
from stream.settings import Settings
from tests.support.harness import WorkerProcess, wait_until, worker_settings

PUBLISHED = re.compile(r"published (\d+) records")
SOURCES: dict[str, ModuleType] = {"follow": follow, "follow-sqlite": follow_sqlite}


def settings_for(broker: RunningBroker, name: str, tmp_path: Path) -> Settings:
    """Topics and a consumer group of this test's own (`name` prefixes them)."""
    return worker_settings(broker, name, tmp_path)


def publish(command: str, path: Path, settings: Settings, checkpoint: Path) -> int:
    """`session-stream follow|follow-sqlite PATH --once` in this process; records published."""
    module = SOURCES[command]
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    args = parser.parse_args([
        str(path), "--once", "--checkpoint", str(checkpoint), "--broker", settings.broker,
        "--input-topic", settings.input_topic, "--partitions", str(settings.partitions),
    ])
    stderr = io.StringIO()
    code = module.main(args, stderr=stderr)
    assert code == 0, f"{command} exited {code}: {stderr.getvalue()}"
    match = PUBLISHED.search(stderr.getvalue())
    assert match, stderr.getvalue()
    return int(match.group(1))


def read_per_key(settings: Settings, topic: str) -> dict[str, list[bytes]]:
    """Per key, the values of `topic` in offset order; each key must keep to one partition."""
    values: dict[str, list[bytes]] = defaultdict(list)
    partitions: dict[str, set[int]] = defaultdict(set)

    async def read() -> None:
        async for record in read_topic(settings, topic, follow=False):
            key = record.key.decode()
            values[key].append(record.value)
            partitions[key].add(record.partition)

    asyncio.run(read())
    spread = {key: used for key, used in partitions.items() if len(used) > 1}
    assert not spread, f"sessions on several partitions of {topic}: {spread}"
    return dict(values)


@dataclass
class Outputs:
    """What the worker wrote: per session the clean topic (first occurrences: at-least-once
    may repeat a record, byte for byte), the alerts and the dead letters."""

    clean: dict[str, list[bytes]]
    alerts: list[dict]
    dead_letters: list[dict]

    def drops(self) -> list[dict]:
        return [a for a in self.alerts if a["action"] == "dropped" and a["kind"] in DROP_RULES]

    def accounted(self) -> int:
        return sum(map(len, self.clean.values())) + len(self.drops()) + len(self.dead_letters)


def read_outputs(settings: Settings) -> Outputs:
    clean = {key: list(dict.fromkeys(values))
             for key, values in read_per_key(settings, settings.clean_topic).items()}
    alerts = [orjson.loads(v) for vs in read_per_key(settings, settings.alerts_topic).values()
              for v in vs]
    letters = [orjson.loads(v) for vs in read_per_key(settings, settings.dlq_topic).values()
               for v in vs]
    unique = {orjson.dumps(a, option=orjson.OPT_SORT_KEYS): a for a in alerts}
    return Outputs(clean, list(unique.values()), letters)


def run_worker(settings: Settings, log: Path, entries: int, timeout: float = 180.0) -> Outputs:
    """A worker process over the input topic until it has accounted for `entries` records
    (kept, dropped with an alert, or dead-lettered); then stopped."""
    worker = WorkerProcess(settings, log).start()
    latest: list[Outputs] = []

    def done() -> bool:
        worker.restart_if_stalled()
        latest[:] = [read_outputs(settings)]
        return latest[0].accounted() >= entries

    try:
        wait_until(done, timeout, f"the worker's outputs for {entries} entries")
    except TimeoutError as error:
        raise AssertionError(f"{error}: {latest[0].accounted() if latest else 0} accounted "
                             f"for\n{worker.log_tail()}") from error
    finally:
        worker.stop()
    return latest[0]


@dataclass
class Offline:
    """`session-stream clean` over the same entries: per session the kept lines, the alerts,
    the dead letters."""

    clean: dict[str, list[bytes]]
    alerts: list[dict]
    dead_letters: list[dict]


def clean_offline(folder: Path, work: Path) -> Offline:
    """`session-stream clean FOLDER --out-dir ...`; the kept lines keyed by session id, which is
    each transcript's file name up to `.jsonl` (OpenClaw names them so)."""
    work.mkdir(parents=True, exist_ok=True)
    out, alerts, letters = work / "clean", work / "alerts.jsonl", work / "dead-letters.jsonl"
    code = session_stream(["clean", str(folder), "--out-dir", str(out), "--alerts", str(alerts),
                           "--dead-letters", str(letters)])
    assert code == 0
    kept = {path.name.split(".jsonl")[0]: path.read_bytes().splitlines()
            for path in out.rglob("*.jsonl*") if path.is_file()}
    return Offline(kept, _jsonl(alerts), _jsonl(letters))


def clean_rows_offline(rows: dict[str, list[bytes]], work: Path) -> Offline:
    """`session-stream clean` over rows exported one file per session."""
    folder = work / "exported"
    folder.mkdir(parents=True)
    for session_id, lines in rows.items():
        (folder / f"{session_id}.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    return clean_offline(folder, work)


def _jsonl(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def without_source(alert: dict) -> bytes:
    """An alert as both paths give it: the same but for where the entry came from."""
    return orjson.dumps({k: v for k, v in alert.items() if k != "source"},
                        option=orjson.OPT_SORT_KEYS)


def write_memory(settings: Settings, out: Path, topic: str = "clean") -> dict[str, list[str]]:
    """`session-stream memory-writer --out OUT --once` from the clean (or raw input) topic;
    per session, the lines of its markdown file (a message and its continuation lines are
    one line)."""
    code = session_stream([
        "memory-writer", "--out", str(out), "--once", "--topic", topic,
        "--group", f"{settings.app_id}-memory-{topic}", "--broker", settings.broker,
        "--clean-topic", settings.clean_topic, "--input-topic", settings.input_topic,
    ])
    assert code == 0
    return {path.stem: message_lines(path.read_text())
            for path in sorted(out.glob("*.md"))}


def repeated_lines(memory: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per session, the lines that repeat an earlier line of the same file verbatim."""
    repeated: dict[str, list[str]] = {}
    for session, lines in memory.items():
        seen: set[str] = set()
        again = []
        for line in lines:
            if line in seen:
                again.append(line)
            seen.add(line)
        if again:
            repeated[session] = again
    return repeated
