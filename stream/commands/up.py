"""`session-stream up`: the whole pipeline for one OpenClaw install, in the foreground.

In order: the broker (Apache Kafka, durable, unless --broker or $SESSION_STREAM_BROKER names
one; --memory-only: the embedded Tansu), the worker, the source that fits the OpenClaw found
(its gateway, else its stores, else its session files; a gateway that boots late is waited
for), the memory writer into each agent's workspace. Everything lives in one state folder,
by absolute paths; each process's output goes to <state>/logs/<name>.log. A process that exits
is started again with backoff; SIGTERM or Ctrl-C stops them all in the reverse order.
`session-stream status` shows what it does; `session-stream install` runs it as a service.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TextIO

from stream.brokers.home import assemble_note
from stream.brokers.local import BrokerStartError
from stream.commands.broker import add_broker_arguments, prepare
from stream.openclaw import OpenClaw, add_state_argument
from stream.service.layout import StateDir, add_state_dir_argument
from stream.service.pipeline import AlreadyRunning, Pipeline, check_not_running, web_port
from stream.settings import ENV_PREFIX, Settings, add_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_state_dir_argument(parser)
    add_state_argument(parser, ", holding openclaw.json and agents/")
    add_broker_arguments(parser)
    add_options(parser)


def settings_for(args: argparse.Namespace, state: StateDir, broker_url: str | None) -> Settings:
    """The worker's settings, with what `up` decides where nothing was given: its broker, a
    data folder in the state folder, a stats port that is free, and no start-up deadline (a
    broker or gateway that boots late is waited for; the supervisor restarts what fails)."""
    settings = Settings.load(args)
    given = lambda name: getattr(args, name) is not None or (  # noqa: E731
        ENV_PREFIX + name.upper()) in os.environ
    changes: dict[str, object] = {}
    if broker_url is not None:
        changes["broker"] = broker_url
    if not given("data_dir"):
        changes["data_dir"] = str(state.worker_data)
    if not given("web_port"):
        changes["web_port"] = web_port()
    if not given("startup_deadline"):
        changes["startup_deadline"] = 0.0
    return settings.replace(**changes)


def main(args: argparse.Namespace, stderr: TextIO | None = None) -> int:
    """Exit 0 once stopped by a signal, 2 when it cannot start (said in one line)."""
    stderr = stderr or sys.stderr
    state = StateDir.of(args.state_dir)
    _log_to(state, stderr)
    openclaw = OpenClaw.at(args.openclaw_state)
    log = logging.getLogger(__name__)
    try:
        check_not_running(state)
        log.info("state in %s; OpenClaw in %s", state.root, openclaw.state_dir)
        broker = None
        if args.broker is None and ENV_PREFIX + "BROKER" not in os.environ:
            broker = prepare(state, args.memory_only, args.broker_port)
            if broker.durable and (note := assemble_note()):
                log.info(note)
    except (AlreadyRunning, BrokerStartError) as error:
        hint = "" if isinstance(error, AlreadyRunning) else (
            "; Apache Kafka needs Java 17+ (README, Prerequisites), or run with --memory-only "
            "(the embedded broker: nothing kept across a restart)")
        print(f"session-stream up: {error}{hint}", file=stderr)
        return 2
    if openclaw.config_problem:
        log.warning(openclaw.config_problem)
    settings = settings_for(args, state, broker.url if broker else None)
    Pipeline(state, openclaw, settings, broker).run()
    return 0


def _log_to(state: StateDir, stderr: TextIO) -> None:
    """`up`'s own lines to the terminal (or the service's journal) and to logs/up.log."""
    path = state.log("up")
    path.parent.mkdir(parents=True, exist_ok=True)
    form = logging.Formatter("[%(asctime)s] %(levelname)s session-stream up: %(message)s")
    handlers: list[logging.Handler] = [logging.StreamHandler(stderr), logging.FileHandler(path)]
    for handler in handlers:
        handler.setFormatter(form)
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True)
