"""`session-stream memory-writer`: one markdown memory file per session, from the clean topic.

`--out DIR` consumes `session-events-clean` (or, for the demo's comparison, the raw input
topic) in a consumer group and keeps `DIR/<session>.md`. `--compare RAW_DIR CLEAN_DIR` prints,
per session, how many lines of each directory repeat an earlier line of the same file
verbatim: the same sessions written from the raw topic and from the clean topic.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import TextIO

from aiokafka.errors import KafkaError

from stream.consumers.memory_writer.compare import duplicate_line_report, format_report
from stream.consumers.memory_writer.consume import consume
from stream.consumers.memory_writer.files import MemoryFolderError, MemoryWriter
from stream.kafka.consumer import TopicMissing, cannot_read
from stream.kafka.retry import quiet_client_logs
from stream.settings import Settings, add_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", metavar="DIR", help="directory of the memory files")
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
        "--once", action="store_true", help="stop at the end of the topic instead of following it"
    )
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
        writer = MemoryWriter(Path(args.out))
    except MemoryFolderError as error:
        print(f"session-stream memory-writer: --out {error}", file=stderr)
        return 2
    logging.basicConfig(level=logging.WARNING,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    quiet_client_logs()
    settings = Settings.load(args)
    topic = settings.clean_topic if args.topic == "clean" else settings.input_topic
    group = args.group or f"{settings.app_id}-memory-writer"
    try:
        stats = asyncio.run(consume(settings, topic, writer, group, follow=not args.once))
    except KeyboardInterrupt:
        return 0
    except (KafkaError, TopicMissing) as error:
        print(cannot_read(settings, topic, error), file=stderr)
        return 1
    print(
        f"session-stream: {stats.lines} lines from {stats.records} records of {topic} "
        f"written to {args.out}",
        file=stderr,
    )
    return 0
