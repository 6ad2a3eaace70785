"""`session-stream produce`: its flags and exit codes; the publishing is
`stream.sources.produce`'s."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from aiokafka.errors import KafkaError

from stream.kafka.admin import ensure_input_topic
from stream.settings import Settings, add_options
from stream.sources import produce
from stream.sources.produce import produce_files

DESCRIPTION = produce.__doc__


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="session file or directory")
    add_options(parser, ("broker", "partitions", "replication", "input_topic"))


def main(args: argparse.Namespace, stderr: TextIO | None = None) -> int:
    """Exit 0 when everything was sent, 1 when an input was unreadable or the broker failed."""
    stderr = stderr or sys.stderr
    settings = Settings.load(args)
    try:
        ensure_input_topic(settings)
        report = asyncio.run(produce_files(settings, args.paths))
    except KafkaError as error:
        print(
            f"session-stream: cannot publish to the Kafka broker at {settings.bootstrap}: {error}",
            file=stderr,
        )
        return 1
    for path, reason in report.unreadable:
        print(f"session-stream: cannot read {path}: {reason}", file=stderr)
    print(f"session-stream: {report.summary(settings.input_topic)}", file=stderr)
    return 1 if report.unreadable else 0
