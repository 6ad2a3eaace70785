"""`session-stream dev` (what `make run` runs) on a fresh embedded broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.processes import descendants

pytestmark = pytest.mark.integration


def test_dev_runs_the_example_sessions_through_its_own_broker(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSION_STREAM_")}
    done = subprocess.run(
        [sys.executable, "-m", "stream.cli", "dev", "--until-idle", "4",
         "--data-dir", str(tmp_path / "data")],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "starting the embedded Tansu broker" in done.stderr
    assert "produced 76 records of 8 sessions from 8 files" in done.stderr
    summary = [line for line in done.stderr.splitlines() if line.startswith("-- clean")][-1]
    assert summary.startswith("-- clean 70 | alerts 10 ")
    assert summary.endswith("| dead letters 0")
    drops = [line for line in done.stdout.splitlines() if "delivery_mirror_duplicate" in line]
    assert len(drops) == 2
    # the memory files written from the raw topic repeat the CLI copies and the two delivery
    # mirrors; the clean ones do not
    total = [line.split() for line in done.stderr.splitlines() if line.startswith("total")]
    assert total == [["total", "30", "6", "24", "0"]]
    # one clean memory file shown as OpenClaw's memory indexes it, header first
    shown = [line.removeprefix("  | ") for line in done.stderr.splitlines()
             if line.startswith("  | ")]
    assert shown[0].startswith("# Session: ")
    assert "## Conversation" in shown
    assert any(line.startswith("assistant: ") for line in shown)
    assert "stopped the worker and the broker" in done.stderr


def test_sigterm_stops_the_worker_and_then_the_broker(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSION_STREAM_")}
    dev = subprocess.Popen(
        [sys.executable, "-m", "stream.cli", "dev", "--data-dir", str(tmp_path / "data")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        while not any(line.startswith("-- clean") for line in lines):  # the worker works
            line = dev.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
        children = descendants(dev.pid)
        assert len(children) >= 2  # the broker and the worker
        started = time.monotonic()
        dev.send_signal(signal.SIGTERM)
        rest = dev.communicate(timeout=60)[1]
    finally:
        dev.kill()
    assert dev.returncode == 0 and "stopped the worker and the broker" in rest
    assert time.monotonic() - started < 30
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()]
