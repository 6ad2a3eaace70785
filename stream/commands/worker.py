"""`session-stream worker`: the streaming worker, every option of `stream.settings` a flag."""

from __future__ import annotations

import argparse

from stream.settings import Settings, add_options

DESCRIPTION = "Consume session events, emit cleaned entries, alerts and dead letters."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser)


def main(args: argparse.Namespace) -> int:
    # Faust takes a second to import, and only the worker needs it: every other command
    # imports this module, so the worker's own come in here.
    from stream.worker.run import run_worker

    return run_worker(Settings.load(args))
