"""The processes of `session-stream up`: started in order, restarted with backoff when one
exits, stopped in the reverse order, none left behind.

Each child runs in a process group of its own, so a Ctrl-C at the terminal reaches `up` alone
and `up` stops the children one by one: the sources first (their last batch checkpointed),
the memory writer, the worker, the broker last, each with SIGTERM and SIGKILL after its
grace. Linux also kills every child when `up` itself dies by SIGKILL (PR_SET_PDEATHSIG); under
systemd the unit's cgroup does the same on every system.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from stream.brokers.local import die_with_parent_hook
from stream.service.layout import StateDir

log = logging.getLogger(__name__)

FIRST_BACKOFF = 1.0
MAX_BACKOFF = 60.0
# A child that ran this long before it exited was healthy: its next restart waits the first
# backoff again, not the doubled one.
HEALTHY_AFTER = 60.0
POLL = 0.2


@dataclass
class ChildSpec:
    name: str
    argv: list[str]
    env: dict[str, str]
    stop_grace: float = 20.0
    # Checked after a start before the next child starts: the broker answers.
    ready: Callable[[], bool] | None = None
    ready_timeout: float = 180.0


@dataclass
class Child:
    spec: ChildSpec
    process: subprocess.Popen | None = None
    started: float = 0.0
    restarts: int = 0
    backoff: float = FIRST_BACKOFF
    restart_at: float | None = None
    last_exit: int | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None


class Supervisor:
    def __init__(self, state: StateDir, on_change: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.state = state
        self.children: list[Child] = []
        self.on_change = on_change
        self.clock = clock

    def start(self, spec: ChildSpec, stop: Callable[[], bool]) -> Child:
        """Start `spec` after those started before it; with a `ready` check, return once it
        passes (starting it again while it keeps exiting), or once `stop()` says so."""
        child = Child(spec)
        self.children.append(child)
        self._spawn(child)
        if spec.ready is not None:
            deadline = self.clock() + spec.ready_timeout
            while not stop() and not spec.ready():
                self.watch()
                if self.clock() > deadline:
                    log.warning("%s is not ready after %.0f s; going on (log: %s)", spec.name,
                                spec.ready_timeout, self.state.log(spec.name))
                    break
                time.sleep(POLL)
        return child

    def watch(self) -> None:
        """One look at every child: an exited one is started again after its backoff."""
        now = self.clock()
        for child in self.children:
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restart_at = None
                    child.restarts += 1
                    self._spawn(child)
                continue
            if child.process is None or child.process.poll() is None:
                continue
            code = child.process.returncode
            child.last_exit = code
            ran = now - child.started
            child.backoff = FIRST_BACKOFF if ran >= HEALTHY_AFTER else child.backoff
            log.warning("%s exited with code %s after %.0f s; starting it again in %.0f s "
                        "(log: %s)", child.spec.name, code, ran, child.backoff,
                        self.state.log(child.spec.name))
            child.restart_at = now + child.backoff
            child.backoff = min(child.backoff * 2, MAX_BACKOFF)
            self.on_change()

    def run(self, stop: Callable[[], bool], tick: Callable[[], None] = lambda: None) -> None:
        """Watch until `stop()`; `tick` runs at every look (a source that comes later)."""
        while not stop():
            self.watch()
            tick()
            time.sleep(POLL)

    def stop_all(self) -> None:
        """The reverse of the start order, each child waited for before the next."""
        for child in reversed(self.children):
            child.restart_at = None
            process = child.process
            if process is None or process.poll() is not None:
                continue
            log.info("stopping %s (pid %d)", child.spec.name, process.pid)
            _signal(process, signal.SIGTERM)
            try:
                process.wait(child.spec.stop_grace)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %.0f s: killed", child.spec.name,
                            child.spec.stop_grace)
                _signal(process, signal.SIGKILL)
                process.wait()
        self.on_change()

    def _spawn(self, child: Child) -> None:
        with self.state.open_log(child.spec.name) as out:
            out.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S%z')} started by session-stream "
                      f"up: {' '.join(child.spec.argv)}\n".encode())
            out.flush()
            child.process = subprocess.Popen(
                child.spec.argv, env=child.spec.env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, cwd=self.state.root,
                # its own group: a terminal's Ctrl-C reaches `up`, which stops the children
                # in order; and every process of a child gets the signal meant for it
                start_new_session=True,
                preexec_fn=die_with_parent_hook(),  # noqa: PLW1509 - see the hook
            )
        child.started = self.clock()
        log.info("%s started (pid %d, log %s)", child.spec.name, child.process.pid,
                 self.state.log(child.spec.name))
        self.on_change()


def _signal(process: subprocess.Popen, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
