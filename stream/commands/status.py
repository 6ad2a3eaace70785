"""`session-stream status`: what the pipeline `session-stream up` runs is doing.

Each process up or down; how far the worker's and the memory writer's consumer groups are
behind their topics, and the source behind OpenClaw's store; the records in, kept, dropped and
dead-lettered since the topics began, read from the broker (a restart does not reset them);
the last alerts with their times. Exit 0 when everything runs, 1 when something is down.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from stream.kafka.retry import quiet_client_logs
from stream.service.layout import StateDir, add_state_dir_argument
from stream.service.status import gather, render
from stream.settings import positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_state_dir_argument(parser)
    parser.add_argument("--alerts", type=positive_int, default=5, metavar="N",
                        help="how many of the last alerts to show (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def main(args: argparse.Namespace, stdout: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    quiet_client_logs()
    report = gather(StateDir.of(args.state_dir), args.alerts)
    print(json.dumps(report, indent=2) if args.json else render(report), file=stdout)
    return 1 if report["problems"] else 0
