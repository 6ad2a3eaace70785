"""`session-stream up` as a process of the tests: started on a state folder of the test's own,
read through `status`, stopped with SIGTERM, or killed with every process it started, as a
power cut or a reboot would."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stream.brokers import free_port
from stream.service.layout import StateDir
from stream.service.status import alive, gather

# The durable broker where the suite runs on Apache Kafka (`make test-kafka`), the embedded
# memory-only Tansu otherwise.
MEMORY_ONLY = os.environ.get("SESSION_STREAM_TEST_BROKER", "tansu") != "kafka"
START_TIMEOUT = 240.0


class Up:
    def __init__(self, state: Path, openclaw: Path, *, memory_only: bool = MEMORY_ONLY,
                 env: dict[str, str] | None = None) -> None:
        self.state = StateDir(state)
        self.openclaw = openclaw
        self.memory_only = memory_only
        self.broker_port = free_port()  # kept by the state folder after the first start
        self.env = {**{k: v for k, v in os.environ.items()
                       if not k.startswith(("SESSION_STREAM_", "OPENCLAW_"))}, **(env or {})}
        self.process: subprocess.Popen | None = None
        self.output = state.parent / f"{state.name}-up.out"

    def start(self) -> Up:
        args = ["up", "--state-dir", str(self.state.root), "--openclaw-state",
                str(self.openclaw), "--broker-port", str(self.broker_port),
                "--web-port", str(free_port()), "--partitions", "4"]
        if self.memory_only:
            args.append("--memory-only")
        with self.output.open("ab") as out:
            self.process = subprocess.Popen([sys.executable, "-m", "stream.cli", *args],
                                            env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        self.wait(lambda report: report["up"] and report["up"]["running"]
                  and report["broker"]["answers"]
                  and all(p["running"] for p in report["processes"].values())
                  and {"worker", "memory-writer"} <= set(report["processes"]),
                  START_TIMEOUT, "up to start the broker, the worker and the memory writer")
        return self

    def status(self, alerts: int = 5) -> dict[str, Any]:
        return gather(self.state, alerts)

    def wait(self, condition: Callable[[dict[str, Any]], bool], timeout: float,
             what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        report: dict[str, Any] = {}
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"up exited {self.process.returncode}:\n{self.log_tail()}")
            report = self.status()
            if condition(report):
                return report
            time.sleep(1.0)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last status: "
                             f"{report}\n{self.log_tail()}")

    def pids(self) -> list[int]:
        """up's and every process it started, as up.json names them."""
        run = self.state.read_run() or {}
        children = [child["pid"] for child in run.get("children", {}).values()]
        return [pid for pid in [run.get("pid"), *children] if isinstance(pid, int)]

    def stop(self, timeout: float = 200.0) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill_everything(self) -> None:
        """SIGKILL to every process at once, the broker included: nothing stops cleanly."""
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert self.process is not None
        self.process.wait(30)
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in pids):
            assert time.monotonic() < deadline, f"still running after SIGKILL: {pids}"
            time.sleep(0.2)

    def ensure_stopped(self) -> None:
        """At the end of a test, whatever happened: nothing of it left running."""
        if self.process is not None and self.process.poll() is None:
            try:
                self.stop(200)
            except subprocess.TimeoutExpired:
                self.kill_everything()

    def log_tail(self, lines: int = 30) -> str:
        tails = []
        for path in [self.output, *sorted((self.state.root / "logs").glob("*.log"))]:
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                tails.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(tails)
