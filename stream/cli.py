"""The `session-stream` command: argument parsing only; each subcommand calls into its module."""

from __future__ import annotations

import argparse
import sys

from stream import offline
from stream.engine.context import DEFAULT_MAX_IDS


def _add_clean(commands: argparse._SubParsersAction) -> None:
    clean = commands.add_parser(
        "clean",
        help="clean session files offline",
        description="Clean OpenClaw session files with the same engine the worker runs.",
    )
    clean.add_argument("paths", nargs="+", metavar="PATH", help="session file or directory")
    clean.add_argument(
        "--out", help="cleaned output of a single input file (default: standard output; - too)"
    )
    clean.add_argument(
        "--out-dir", help="directory for cleaned copies, at each file's path relative to its PATH"
    )
    clean.add_argument("--alerts", help="write alerts here, one JSON object per line")
    clean.add_argument("--dead-letters", help="write dead letters here, one JSON object per line")
    clean.add_argument(
        "--max-ids",
        type=int,
        default=DEFAULT_MAX_IDS,
        help="recent entry ids and idempotency keys remembered per session (default %(default)s)",
    )
    clean.set_defaults(handler=offline.main)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="session-stream",
        description="Clean AI-agent session transcripts: drop duplicate and echo entries, "
        "raise anomaly alerts.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_clean(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except offline.UsageError as error:
        parser.error(str(error))  # exits 2, as argparse does for every usage error
    return 2


if __name__ == "__main__":
    sys.exit(main())
