"""`session-stream memory-writer`: one markdown memory file per session, from the clean topic.

`--out DIR` consumes `session-events-clean` (or, for the demo's comparison, the raw input
topic) in a consumer group and keeps `DIR/<session>.md` (`DIR/<agent>/<session>.md` with
`--per-agent`); `--workspaces` keeps each agent's sessions in its own OpenClaw workspace, in
`memory/session-stream/`. `--compare RAW_DIR CLEAN_DIR` prints, per session, how many lines of
each directory repeat an earlier line of the same file verbatim: the same sessions written from
the raw topic and from the clean topic.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import TextIO

from aiokafka.errors import KafkaError

from stream.consumers.consume import RunStats, consume
from stream.consumers.memory_writer.compare import duplicate_line_report, format_report
from stream.consumers.memory_writer.files import MemoryFolderError, MemoryWriter
from stream.consumers.memory_writer.folders import (
    AgentWorkspaces,
    FolderPerAgent,
    Folders,
    OneFolder,
)
from stream.consumers.memory_writer.sink import MemorySink
from stream.kafka.consumer import TopicMissing, cannot_read
from stream.kafka.retry import quiet_client_logs
from stream.openclaw import OpenClaw, add_state_argument
from stream.progress import Progress, add_progress_argument
from stream.settings import Settings, add_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", metavar="DIR", help="directory of the memory files")
    mode.add_argument(
        "--workspaces", action="store_true",
        help="each agent's sessions in its own OpenClaw workspace, in memory/session-stream "
        "(the workspaces as OpenClaw's config names them)",
    )
    mode.add_argument(
        "--compare",
        nargs=2,
        metavar=("RAW_DIR", "CLEAN_DIR"),
        help="print the duplicate lines of two memory directories side by side, then exit",
    )
    parser.add_argument(
        "--topic",
        choices=("clean", "input"),
        default="clean",
        help="read the clean topic (default) or the raw input topic (for the comparison)",
    )
    parser.add_argument(
        "--per-agent", action="store_true",
        help="with --out: a folder per agent in DIR (DIR/<agent id>/<session>.md)",
    )
    add_state_argument(parser, ", holding openclaw.json", only="with --workspaces: ")
    parser.add_argument(
        "--once", action="store_true", help="stop at the end of the topic instead of following it"
    )
    add_progress_argument(parser)
    parser.add_argument(
        "--group",
        help="consumer group (default: <app-id>-memory-writer); its committed offsets say where "
        "to resume, so a new --out directory wants a new group",
    )
    add_options(parser, ("broker", "app_id", "input_topic", "clean_topic", "session_timeout"))


def main(
    args: argparse.Namespace, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Exit 0 at the end (--once) or on Ctrl-C, 1 when the broker or the topic is not there,
    2 when --out cannot hold the memory files (said in one line, before any broker is asked)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    if args.compare:
        print(format_report(duplicate_line_report(*map(Path, args.compare))), file=stdout)
        return 0
    try:
        folders = _folders(args)
    except MemoryFolderError as error:
        print(f"session-stream memory-writer: --out {error}", file=stderr)
        return 2
    # Its own progress lines; the Kafka client's group chatter only when something is wrong.
    logging.basicConfig(level=logging.INFO,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    quiet_client_logs()
    settings = Settings.load(args)
    topic = settings.clean_topic if args.topic == "clean" else settings.input_topic
    group = args.group or f"{settings.app_id}-memory-writer"
    progress = Progress(f"memory-writer into {folders.describe()}", args.progress_interval)
    try:
        stats = asyncio.run(_consume(settings, topic, MemoryWriter(folders), group,
                                     follow=not args.once, progress=progress))
    except KeyboardInterrupt:
        progress.stopped()
        return 0
    except (KafkaError, TopicMissing) as error:
        print(cannot_read(settings, topic, error), file=stderr)
        return 1
    except MemoryFolderError as error:
        print(f"session-stream memory-writer: {error}", file=stderr)
        return 2
    if not args.once:
        progress.stopped()
    print(
        f"session-stream: {stats.written} lines from {stats.records} records of {topic} "
        f"written to {folders.describe()}",
        file=stderr,
    )
    return 0


def _folders(args: argparse.Namespace) -> Folders:
    if args.workspaces:
        return AgentWorkspaces(OpenClaw.at(args.openclaw_state))
    if args.per_agent:
        return FolderPerAgent(Path(args.out))
    return OneFolder(Path(args.out))


async def _consume(settings: Settings, topic: str, writer: MemoryWriter, group: str, *,
                   follow: bool, progress: Progress) -> RunStats:
    """Until the end of the topic (--once), or SIGTERM or SIGINT: a supervisor's stop ends
    the batch in hand, whose lines are durable and committed, and the run says so."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop.set)
    try:
        return await consume(settings, topic, MemorySink(writer), group, follow=follow, stop=stop,
                             progress=progress)
    finally:
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(number)
