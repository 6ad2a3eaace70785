"""What `session-stream status` reports of a pipeline `up` runs: each process up or down, the
lag of each consumer group and of the source behind OpenClaw's store, the records in, kept,
dropped and dead-lettered, and the last alerts with their times.

The counts are read from the broker, not from the worker's /stats, so that a restart does not
reset them: the input topic's by its offsets, the outputs' by reading them as a committed reader
does (the worker writes them in transactions on Kafka, whose markers and aborted records hold
offsets too). At-least-once delivery (on Tansu) may put a record on a topic twice after a crash:
the topic counts are then that much higher, while the drops are counted by distinct alert id.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import os
import socket
import sqlite3
from collections.abc import Iterable
from contextlib import closing, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from stream.consumers.tail import format_record, record_time
from stream.kafka.admin import answers_metadata
from stream.kafka.configuration import client_options
from stream.kafka.consumer import TopicMissing, make_consumer, topic_partitions
from stream.kafka.ends import committed_counts, record_ends
from stream.service.layout import StateDir
from stream.settings import Settings
from stream.sources.follow import KIND as FOLLOW
from stream.sources.positions import PositionsError, load_positions
from stream.sources.session_files import is_session_file
from stream.sources.store.rewrites import progress_from_json

BROKER_TIMEOUT = 10.0
# Processes a pid of up.json may belong to: any other is a pid used again since.
_OURS = (b"stream.cli", b"session-stream", b"kafka.Kafka", b"tansu")


def gather(state: StateDir, alerts: int = 5) -> dict[str, Any]:
    """Everything the report says, as JSON-ready data; `problems` lists what is wrong."""
    run = state.read_run()
    if run is None:
        return {"state_dir": str(state.root), "up": None, "problems": [
            f"`session-stream up` never ran with the state folder {state.root}"]}
    # up.json keeps no secret: a SASL password comes from this environment, as for any command
    settings = Settings.load(environ={}).replace(
        **run["settings"], sasl_password=os.environ.get("SESSION_STREAM_SASL_PASSWORD", ""))
    report: dict[str, Any] = {
        "state_dir": str(state.root),
        "up": {"pid": run["pid"], "running": alive(run["pid"]), "since": run["started_at"],
               "stopped_at": run["stopped_at"]},
        "broker": {**run["broker"], "answers": False},
        "processes": {name: {**child, "running": alive(child["pid"])}
                      for name, child in run["children"].items()},
        "source": run["source"],
        "memory_group": run["memory_group"],
    }
    problems = []
    if not report["up"]["running"]:
        when = f" (stopped {run['stopped_at']})" if run["stopped_at"] else ""
        problems.append(f"session-stream up is not running{when}")
    else:
        problems += [f"{name} is down (log: {child['log']})"
                     for name, child in report["processes"].items() if not child["running"]]
    # The source's distance first, the broker's offsets after: what the source had sent by
    # then is in those offsets, so "nothing behind" anywhere means all of it went through.
    if run["source"] is not None:
        report["source"]["behind"] = source_behind(run["source"], Path(run["openclaw_state"]))
    try:
        if not _listens(settings):
            raise OSError("nothing listens there")
        report.update(asyncio.run(asyncio.wait_for(_from_broker(settings, run, alerts),
                                                   BROKER_TIMEOUT * 3)))
        report["broker"]["answers"] = True
    except (KafkaError, OSError, TimeoutError) as error:
        problems.append(f"the broker at {settings.broker} does not answer ({error or 'timed out'})")
    report["problems"] = problems
    return report


def _listens(settings: Settings) -> bool:
    """Any of the brokers accepts a connection: asked before the client, which would log a
    line per refused attempt."""
    for address in settings.bootstrap.split(","):
        host, _, port = address.rpartition(":")
        with suppress(OSError, ValueError), socket.create_connection((host, int(port)), 2):
            return True
    return False


def alive(pid: int | None) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc (macOS): the pid is all there is to go by
    return any(mark in command for mark in _OURS)


async def _from_broker(settings: Settings, run: dict[str, Any], alerts: int) -> dict[str, Any]:
    options = client_options(settings)
    if not await answers_metadata(options):
        raise OSError("no broker in its metadata")
    topics = {"in": settings.input_topic, "kept": settings.clean_topic,
              "dead_lettered": settings.dlq_topic, "alerts": settings.alerts_topic}
    partitions, starts = await _partitions_and_starts(settings, list(topics.values()))
    # The groups' commits are read before the ends: every output of an input the worker has
    # committed is then within the ends, and a lag of 0 means the counts are whole.
    groups = {"worker": (settings.app_id, settings.input_topic),
              "memory-writer": (run["memory_group"], settings.clean_topic)}
    committed = {role: await _committed(options, group, [tp for tp in partitions
                                                         if tp.topic == topic])
                 for role, (group, topic) in groups.items()}
    # (the worker creates the topics as it starts: none may be there yet)
    ends = await record_ends(options, partitions) if partitions else {}
    outputs = [tp for tp in partitions if tp.topic in (settings.clean_topic, settings.dlq_topic)]
    found = await committed_counts(options, {tp: ends[tp] for tp in outputs}) if outputs else {}
    counts = {role: sum(found.get(tp, ends[tp] - starts[tp]) for tp in partitions
                        if tp.topic == topic)
              for role, topic in topics.items()}
    read, dropped, last = await _read_alerts(
        options, {tp: end for tp, end in ends.items() if tp.topic == settings.alerts_topic},
        alerts)
    return {"records": {"in": counts["in"], "kept": counts["kept"], "dropped": dropped,
                        "dead_lettered": counts["dead_lettered"], "alerts": read},
            "lag": {role: _lag(group, topic, committed[role], ends)
                    for role, (group, topic) in groups.items()},
            "last_alerts": last}


async def _partitions_and_starts(settings: Settings, topics: list[str]
                                 ) -> tuple[list[TopicPartition], dict[TopicPartition, int]]:
    """The partitions of the topics that exist, and where each begins."""
    consumer = make_consumer(settings)
    await consumer.start()
    try:
        partitions = []
        for topic in topics:
            with suppress(TopicMissing):
                partitions += await topic_partitions(consumer, [topic], wait=False, grace=0)
        return partitions, (await consumer.beginning_offsets(partitions) if partitions else {})
    finally:
        await consumer.stop()


async def _committed(options: dict, group: str, partitions: list[TopicPartition]
                     ) -> dict[TopicPartition, int]:
    """Where `group` has committed each of `partitions` it has committed."""
    if not partitions:
        return {}
    admin = AIOKafkaAdminClient(**options)
    await admin.start()
    try:
        # its partitions named: Tansu drops the connection otherwise
        committed = await admin.list_consumer_group_offsets(group, partitions=partitions)
    finally:
        await admin.close()
    return {tp: meta.offset for tp, meta in committed.items() if meta.offset >= 0}


def _lag(group: str, topic: str, committed: dict[TopicPartition, int],
         ends: dict[TopicPartition, int]) -> dict[str, Any]:
    """Records of `topic` the group has not committed yet (all of them before its first)."""
    return {"group": group, "topic": topic,
            "behind": sum(max(0, end - committed.get(tp, 0)) for tp, end in ends.items()
                          if tp.topic == topic),
            "committed": bool(committed)}


async def _read_alerts(options: dict, ends: dict[TopicPartition, int], last: int
                       ) -> tuple[int, int, list[str]]:
    """The alerts up to `ends`, the distinct dropped-entry alerts among them, and the last
    `last` alerts as `tail` prints them."""
    if not ends:
        return 0, 0, []
    partitions = list(ends)
    order = itertools.count()
    read = 0
    consumer = AIOKafkaConsumer(**options, enable_auto_commit=False,
                                isolation_level="read_committed")
    await consumer.start()
    dropped: set[str] = set()
    latest: list[tuple[int, int, ConsumerRecord]] = []  # a heap of the newest, by time
    try:
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                for record in records:
                    if record.offset >= ends[tp]:
                        continue  # written since the ends were read
                    read += 1
                    with suppress(orjson.JSONDecodeError, AttributeError):
                        alert = orjson.loads(record.value)
                        if alert.get("action") == "dropped":
                            dropped.add(alert.get("id"))
                    heapq.heappush(latest, (record.timestamp, next(order), record))
                    if len(latest) > last:
                        heapq.heappop(latest)
    finally:
        await consumer.stop()
    return read, len(dropped), [f"{record_time(r)} {format_record('alerts', r)}"
                                for _, _, r in sorted(latest)]


# --- the source's distance behind OpenClaw ---------------------------------------------------


def source_behind(source: dict[str, Any], openclaw_state: Path) -> dict[str, Any]:
    """Rows of OpenClaw's stores past the source's checkpoint (per agent), or bytes of its
    session files for `follow`; `unknown` with the reason when they cannot be read."""
    try:
        if source["kind"] == FOLLOW:
            return {"bytes": _files_behind(Path(source["checkpoints"]["*"]),
                                           openclaw_state / "agents")}
        return {"rows": {agent: _store_behind(source["kind"], Path(path), agent, openclaw_state)
                         for agent, path in source["checkpoints"].items()}}
    except (OSError, sqlite3.Error, PositionsError, ValueError, KeyError) as error:
        return {"unknown": str(error)}


def _store_behind(kind: str, checkpoint: Path, agent: str, openclaw_state: Path) -> int:
    store = openclaw_state / "agents" / agent / "agent" / "openclaw-agent.sqlite"
    data = _checkpoint_content(checkpoint)
    if kind == "gateway" and data is not None:
        data = (data.get("stores") or {}).get(agent)
    sent = progress_from_json(data, checkpoint).last_seq
    with closing(sqlite3.connect(f"file:{quote(str(store))}?mode=ro", uri=True,
                                 timeout=5)) as db:
        rows = db.execute("SELECT session_id, max(seq), count(*) FROM transcript_events "
                          "GROUP BY session_id").fetchall()
        behind = 0
        for session, top, count in rows:
            if session not in sent:
                behind += count
            elif top > sent[session]:
                (more,) = db.execute("SELECT count(*) FROM transcript_events WHERE "
                                     "session_id = ? AND seq > ?",
                                     (session, sent[session])).fetchone()
                behind += more
    return behind


def _checkpoint_content(path: Path) -> dict[str, Any] | None:
    """A checkpoint's content whatever its kind and origin (status only reads it)."""
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None


def _files_behind(checkpoint: Path, root: Path) -> int:
    data = load_positions(checkpoint, FOLLOW, str(root.resolve())) if checkpoint.exists() else None
    read = {entry["path"]: entry["offset"] for entry in (data or {}).get("files", [])}
    return sum(max(0, path.stat().st_size - read.get(str(path.relative_to(root)), 0))
               for path in _session_files(root))


def _session_files(root: Path) -> Iterable[Path]:
    return (path for path in root.rglob("*") if path.is_file() and is_session_file(path)
            and not path.name.endswith(".gz"))


# --- the report ------------------------------------------------------------------------------


def render(report: dict[str, Any]) -> str:
    up = report["up"]
    if up is None:
        return "\n".join(report["problems"])
    running = f"running, pid {up['pid']}" if up["running"] else "not running"
    lines = [f"session-stream up: {running} (started {up['since']}; state {report['state_dir']})"]
    broker = report["broker"]
    kind = {"kafka": "Apache Kafka, durable", "tansu": "Tansu, memory-only"}.get(
        broker["local"], "configured")
    lines.append(f"  {'broker':<14}{'up' if broker['answers'] else 'DOWN':<6}{broker['url']} "
                 f"({kind})")
    for name, child in report["processes"].items():
        if name == "broker":
            continue
        state = "up" if child["running"] else "DOWN"
        extra = f"pid {child['pid']}" if child["running"] else f"log {child['log']}"
        if child["restarts"]:
            extra += f", restarted {child['restarts']}x"
        lines.append(f"  {name:<14}{state:<6}{extra}")
    if report.get("source") is None:
        lines.append("  source        waiting for OpenClaw's first session")
    if "lag" in report:
        lag = report["lag"]
        lines.append(f"lag: worker {lag['worker']['behind']} records behind "
                     f"{lag['worker']['topic']}; memory-writer {lag['memory-writer']['behind']} "
                     f"behind {lag['memory-writer']['topic']}")
    source = report.get("source")
    if source is not None:
        behind = source.get("behind", {})
        if "rows" in behind:
            said = ", ".join(f"{agent} {n}" for agent, n in behind["rows"].items())
            lines.append(f"source ({source['kind']}): rows of OpenClaw's stores not yet sent: "
                         f"{said}")
        elif "bytes" in behind:
            lines.append(f"source ({source['kind']}): {behind['bytes']} bytes of session files "
                         "not yet sent")
        else:
            lines.append(f"source ({source['kind']}): distance unknown ({behind.get('unknown')})")
    if "records" in report:
        records = report["records"]
        lines.append(f"records (read from the topics): in {records['in']}, kept {records['kept']}, "
                     f"dropped {records['dropped']}, dead-lettered {records['dead_lettered']}; "
                     f"alerts {records['alerts']}")
        lines.append("last alerts:" if report["last_alerts"] else "last alerts: none")
        lines += [f"  {line}" for line in report["last_alerts"]]
    lines += [f"problem: {problem}" for problem in report["problems"]]
    return "\n".join(lines)
