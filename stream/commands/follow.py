"""`session-stream follow`: its flags and exit codes; the source is `stream.sources.follow`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from stream.commands.publishing import add_source_arguments, run
from stream.sources import follow
from stream.sources.follow import DEFAULT_CHECKPOINT, FileFollower

DESCRIPTION = follow.__doc__


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "root",
        metavar="DIR",
        type=Path,
        help="folder searched at any depth for session files; the narrower the cheaper each "
        "pass (e.g. ~/.openclaw/agents)",
    )
    add_source_arguments(parser, DEFAULT_CHECKPOINT)


def main(args: argparse.Namespace, stderr: TextIO | None = None) -> int:
    """Exit 0 when done (--once) or stopped by a signal, 1 on a broker, folder or checkpoint
    error."""
    return run("follow", lambda: FileFollower(args.root, args.checkpoint), args, stderr)
