"""The `session-stream` command: argument parsing only; each subcommand is a module of
`stream.commands`."""

from __future__ import annotations

import argparse
import sys

from stream import __version__
from stream.commands import (
    broker,
    clean,
    dev,
    follow,
    follow_sqlite,
    gateway,
    install,
    memory_writer,
    produce,
    status,
    tail,
    uninstall,
    up,
    verdicts,
    worker,
)
from stream.consumers.memory_writer.index_format import INDEX_FORMAT
from stream.formats import EXIT_CODE, FormatTooNew
from stream.kafka.configuration import SecurityError
from stream.sources.positions import POSITIONS_FORMAT
from stream.worker.codec import STATE_FORMAT

# (name, module, help), in the order `--help` lists them.
COMMANDS = (
    ("clean", clean, "clean session files offline"),
    ("worker", worker, "run the streaming worker"),
    ("produce", produce, "publish session files to the input topic"),
    ("tail", tail, "print the records of a topic readably"),
    ("dev", dev, "run broker, worker and example sessions locally"),
    ("up", up, "run the whole pipeline for one OpenClaw install: broker, worker, source, "
     "memory writer"),
    ("status", status, "show what the pipeline of `up` does: processes, lag, records, last alerts"),
    ("install", install, "run `up` as a service at boot (a systemd user unit, a launchd agent)"),
    ("uninstall", uninstall, "stop and remove that service; the state folder stays"),
    ("broker", broker, "run the broker of a state folder alone"),
    ("memory-writer", memory_writer,
     "write one markdown memory file per session from the clean topic"),
    ("follow", follow, "publish lines appended to live session files"),
    ("follow-sqlite", follow_sqlite, "publish new events of an agent's SQLite store"),
    ("gateway", gateway, "publish transcripts as the OpenClaw Gateway's event bus announces them"),
    ("verdicts", verdicts,
     "answer the OpenClaw context engine which entries were dropped, on loopback"),
)


def describe() -> str:
    """The version line `session-stream --version` prints: the package and the formats of what
    it stores (stream.formats)."""
    return (f"session-stream {__version__} (formats: state {STATE_FORMAT}, positions "
            f"{POSITIONS_FORMAT}, memory index {INDEX_FORMAT})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="session-stream",
        description="Clean AI-agent session transcripts: drop duplicate and echo entries, "
        "raise anomaly alerts.",
    )
    parser.add_argument("--version", action="version", version=describe(),
                        help="print the version and the formats of the state it stores")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, module, help in COMMANDS:
        command = commands.add_parser(
            name, help=help, description=getattr(module, "DESCRIPTION", module.__doc__))
        module.add_arguments(command)
        command.set_defaults(handler=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (clean.UsageError, SecurityError) as error:
        parser.error(str(error))  # exits 2, as argparse does for every usage error
    except FormatTooNew as error:
        print(f"session-stream {args.command}: {error}", file=sys.stderr)
        return EXIT_CODE
    return 2


if __name__ == "__main__":
    sys.exit(main())
