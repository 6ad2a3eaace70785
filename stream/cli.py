"""The `session-stream` command: argument parsing only; each subcommand calls into its module."""

from __future__ import annotations

import argparse
import sys

from stream.commands import broker, dev, gateway, install, status, uninstall, up, verdicts
from stream.commands import clean as offline
from stream.consumers import tail
from stream.consumers.memory_writer import command as memory_writer
from stream.engine.context import DEFAULT_MAX_IDS
from stream.formats import EXIT_CODE, FormatTooNew, describe
from stream.kafka.configuration import SecurityError
from stream.settings import Settings, add_options
from stream.sources import follow, produce
from stream.sources import sqlite as follow_sqlite


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
    clean.add_argument(
        "--alert-snippet-chars",
        type=int,
        default=0,
        help="put the first N characters of an entry's text into its alerts (default: none)",
    )
    clean.add_argument(
        "--heartbeat-prompt",
        default="",
        help="the heartbeat prompt OpenClaw is configured with, if not its default",
    )
    clean.set_defaults(handler=offline.main)


def _add_worker(commands: argparse._SubParsersAction) -> None:
    worker = commands.add_parser(
        "worker",
        help="run the streaming worker",
        description="Consume session events, emit cleaned entries, alerts and dead letters.",
    )
    add_options(worker)
    worker.set_defaults(handler=_run_worker)


def _run_worker(args: argparse.Namespace) -> int:
    from stream.worker.run import run_worker  # Faust is slow to import; only the worker needs it

    return run_worker(Settings.load(args))


def _add_module(commands: argparse._SubParsersAction, name: str, module, help: str) -> None:
    parser = commands.add_parser(name, help=help, description=module.__doc__)
    module.add_arguments(parser)
    parser.set_defaults(handler=module.main)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="session-stream",
        description="Clean AI-agent session transcripts: drop duplicate and echo entries, "
        "raise anomaly alerts.",
    )
    parser.add_argument("--version", action="version", version=describe(),
                        help="print the version and the formats of the state it stores")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_clean(commands)
    _add_worker(commands)
    _add_module(commands, "produce", produce, "publish session files to the input topic")
    _add_module(commands, "tail", tail, "print the records of a topic readably")
    _add_module(commands, "dev", dev, "run broker, worker and example sessions locally")
    _add_module(commands, "up", up,
                "run the whole pipeline for one OpenClaw install: broker, worker, source, "
                "memory writer")
    _add_module(commands, "status", status,
                "show what the pipeline of `up` does: processes, lag, records, last alerts")
    _add_module(commands, "install", install,
                "run `up` as a service at boot (a systemd user unit, a launchd agent)")
    _add_module(commands, "uninstall", uninstall,
                "stop and remove that service; the state folder stays")
    _add_module(commands, "broker", broker, "run the broker of a state folder alone")
    _add_module(commands, "memory-writer", memory_writer,
                "write one markdown memory file per session from the clean topic")
    _add_module(commands, "follow", follow, "publish lines appended to live session files")
    _add_module(commands, "follow-sqlite", follow_sqlite,
                "publish new events of an agent's SQLite store")
    _add_module(commands, "gateway", gateway,
                "publish transcripts as the OpenClaw Gateway's event bus announces them")
    _add_module(commands, "verdicts", verdicts,
                "answer the OpenClaw context engine which entries were dropped, on loopback")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (offline.UsageError, SecurityError) as error:
        parser.error(str(error))  # exits 2, as argparse does for every usage error
    except FormatTooNew as error:
        print(f"session-stream {args.command}: {error}", file=sys.stderr)
        return EXIT_CODE
    return 2


if __name__ == "__main__":
    sys.exit(main())
