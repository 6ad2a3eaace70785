"""The whole pipeline for one OpenClaw install, as `session-stream up` runs it: the plan's
processes under the supervisor, and up.json kept current for `session-stream status`."""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stream.brokers.home import MEMORY_ONLY_WARNING, LocalBroker
from stream.brokers.local import free_port, port_is_open
from stream.consumers.memory_writer.folders import WORKSPACE_FOLDER
from stream.openclaw import OpenClaw
from stream.service import plan
from stream.service.layout import StateDir
from stream.service.supervisor import Supervisor
from stream.settings import OPTIONS, Settings

log = logging.getLogger(__name__)

DEFAULT_WEB_PORT = 6066
# How often an install that has written no session yet is looked at again.
SOURCE_LOOK_INTERVAL = 5.0
# Settings up.json leaves out: `status` reads it, and it is no place for a secret.
_SECRET_OPTIONS = {"sasl_password"}


class AlreadyRunning(RuntimeError):
    """Another `up` runs on this state folder."""


@dataclass
class Pipeline:
    state: StateDir
    openclaw: OpenClaw
    settings: Settings
    broker: LocalBroker | None  # None: a broker configured elsewhere

    def __post_init__(self) -> None:
        self.supervisor = Supervisor(self.state, on_change=self.write_run)
        self.source: plan.SourcePlan | None = None
        self._next_look = 0.0
        self._stop = False
        self._started = datetime.now(UTC).isoformat(timespec="seconds")

    def run(self) -> None:
        """Start everything in order, supervise until SIGTERM or SIGINT, stop in reverse."""
        previous = {sig: signal.signal(sig, self._request_stop)
                    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        try:
            self._start()
            log.info("running; `session-stream status --state-dir %s` shows its work",
                     self.state.root)
            self.supervisor.run(lambda: self._stop, tick=self._look_for_source)
        finally:
            log.info("stopping, in the reverse order of the start")
            self.supervisor.stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.write_run(stopped=True)
            log.info("stopped")

    def _request_stop(self, signum: int, frame: object) -> None:
        self._stop = True

    def _start(self) -> None:
        env = self.settings.environment()
        stop = lambda: self._stop  # noqa: E731 - read at each look
        if self.broker is not None:
            if not self.broker.durable:
                log.warning(MEMORY_ONLY_WARNING)
            log.info("broker: %s %s, its data in %s", self.broker.kind, self.broker.url,
                     self.broker.folder)
            self.supervisor.start(plan.broker_spec(self.broker, self.settings, env, self.state),
                                  stop)
        else:
            log.info("broker: %s (configured; not started here)", self.settings.broker)
        self.supervisor.start(plan.worker_spec(env), stop)
        self._look_for_source()
        log.info("memory: into %s, and each other agent's workspace likewise",
                 self.openclaw.workspace(self.openclaw.default_agent) / WORKSPACE_FOLDER)
        self.supervisor.start(plan.writer_spec(self.openclaw, env, self.settings), stop)

    def _look_for_source(self) -> None:
        if self.source is not None or time.monotonic() < self._next_look:
            return
        chosen = plan.choose_source(self.openclaw, self.state, self.settings.environment())
        if chosen is None:
            if self._next_look == 0.0:
                log.info("waiting for OpenClaw's first session under %s (a store: 2026.8+, or "
                         "session files: up to 2026.7)", self.openclaw.state_dir / "agents")
            self._next_look = time.monotonic() + SOURCE_LOOK_INTERVAL
            return
        self.source = chosen
        log.info("source: %s", chosen.describe(self.openclaw))
        for spec in chosen.children:
            self.supervisor.start(spec, lambda: self._stop)

    def write_run(self, stopped: bool = False) -> None:
        self.state.write_run(self.run_record(stopped))

    def run_record(self, stopped: bool = False) -> dict[str, Any]:
        """What `status` reads: how to reach everything, and which processes run."""
        children = {
            child.spec.name: {
                "pid": None if stopped else child.pid,
                "log": str(self.state.log(child.spec.name)),
                "restarts": child.restarts,
                "last_exit": child.last_exit,
            }
            for child in self.supervisor.children
        }
        source = None
        if self.source is not None:
            source = {"kind": self.source.kind,
                      "describe": self.source.describe(self.openclaw),
                      "checkpoints": {k: str(v) for k, v in self.source.checkpoints.items()}}
        return {
            "pid": None if stopped else os.getpid(),
            "started_at": self._started,
            "stopped_at": datetime.now(UTC).isoformat(timespec="seconds") if stopped else None,
            "state_dir": str(self.state.root),
            "openclaw_state": str(self.openclaw.state_dir),
            "broker": {
                "url": self.settings.broker,
                "local": self.broker.kind if self.broker else None,
                "durable": self.broker.durable if self.broker else None,
            },
            "settings": {o.name: getattr(self.settings, o.name) for o in OPTIONS
                         if o.name not in _SECRET_OPTIONS},
            "memory_group": plan.memory_group(self.settings),
            "source": source,
            "children": children,
        }


def check_not_running(state: StateDir) -> None:
    run = state.read_run()
    pid = run.get("pid") if run else None
    if isinstance(pid, int) and _alive(pid) and pid != os.getpid():
        raise AlreadyRunning(f"session-stream up already runs on {state.root} (pid {pid})")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def web_port() -> int:
    """The worker's stats page on its usual port when that is free."""
    return DEFAULT_WEB_PORT if not port_is_open(DEFAULT_WEB_PORT) else free_port()
