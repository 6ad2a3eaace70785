"""`session-stream follow-sqlite`: its flags and exit codes; the source is
`stream.sources.sqlite`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from stream.commands.publishing import add_source_arguments, run
from stream.settings import positive_int
from stream.sources import sqlite
from stream.sources.sqlite import (
    DEFAULT_CHECKPOINT,
    DEFAULT_PAGE_SIZE,
    SqliteFollower,
    zstd_decompressor,
)

DESCRIPTION = sqlite.__doc__


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "database", metavar="PATH", type=Path, help="an agent's openclaw-agent.sqlite"
    )
    parser.add_argument(
        "--page-size",
        type=positive_int,
        default=DEFAULT_PAGE_SIZE,
        metavar="N",
        help="most events read per query and sent per batch (default %(default)s)",
    )
    add_source_arguments(parser, DEFAULT_CHECKPOINT)


def main(args: argparse.Namespace, stderr: TextIO | None = None) -> int:
    """Exit 0 when done (--once) or stopped by a signal, 1 on a broker, database or checkpoint
    error (a zstd-compressed event without a zstd module among them)."""
    return run(
        "follow-sqlite",
        lambda: SqliteFollower(args.database, args.checkpoint, args.page_size, zstd_decompressor(),
                               poll_interval=args.poll_interval),
        args,
        stderr,
    )
