"""`session-stream up` and `status` over an OpenClaw state folder of session files (what
OpenClaw up to 2026.7 writes): the whole pipeline in one command, its work visible in
`status`, and a stop that leaves nothing running. The broker is the durable Apache Kafka in
the Kafka suite, the memory-only Tansu otherwise (tests/support/service.py)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from stream.commands.dev import EXAMPLES
from stream.service.status import alive, render
from tests.support.service import Up

pytestmark = pytest.mark.integration

ENTRIES, DROPPED = 76, 6  # the example sessions, as `clean` counts them


@pytest.fixture
def openclaw(tmp_path: Path) -> Path:
    """An OpenClaw state folder with its sessions and a workspace, as 2026.5.12 leaves one."""
    state = tmp_path / "openclaw"
    sessions = state / "agents" / "main" / "sessions"
    shutil.copytree(EXAMPLES, sessions)
    (state / "workspace").mkdir()
    return state


def test_up_runs_the_pipeline_and_status_shows_its_work(tmp_path: Path, openclaw: Path) -> None:
    up = Up(tmp_path / "state", openclaw)
    try:
        up.start()
        seen: list[dict] = []
        report = up.wait(lambda r: seen.append(r) is None
                         and r.get("records", {}).get("in") == ENTRIES
                         and r["lag"]["worker"]["behind"] == 0
                         and r["lag"]["memory-writer"]["behind"] == 0
                         and r["source"]["behind"] == {"bytes": 0},
                         180, "every entry through the worker and the memory writer")
        # a status taken while the entries flow: where the worker is caught up, each entry
        # it counts in is kept, dropped or dead-lettered
        caught_up = [r["records"] for r in seen
                     if r.get("records") and r["lag"]["worker"]["behind"] == 0]
        assert all(c["kept"] + c["dropped"] + c["dead_lettered"] == c["in"] for c in caught_up)
        assert report["source"]["kind"] == "follow"
        assert report["records"]["dropped"] == DROPPED
        assert report["records"]["kept"] == ENTRIES - DROPPED
        assert report["problems"] == []
        assert f"dropped {DROPPED}," in render(report)
        # every alert, each after its time: the two mirrors dropped among them
        last = up.status(alerts=50)["last_alerts"]
        assert len(last) == 10
        assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \w+ \w+ session=", line)
                   for line in last)
        assert sum("delivery_mirror_duplicate" in line for line in last) == 2
        # the memory: in OpenClaw's workspace, whose memory/ folder nothing had made
        written = sorted((openclaw / "workspace" / "memory" / "session-stream").glob("*.md"))
        assert len(written) == 7
        pids = up.pids()
        assert up.stop() == 0
    finally:
        up.ensure_stopped()
    assert not [pid for pid in pids if alive(pid)]
    stopped = up.status()
    assert stopped["problems"][0].startswith("session-stream up is not running (stopped ")
    # every process's output in a file of the state folder
    logs = {path.name for path in (tmp_path / "state" / "logs").iterdir()}
    assert {"up.log", "broker.log", "worker.log", "source.log", "memory-writer.log"} <= logs
    run = json.loads((tmp_path / "state" / "up.json").read_text())
    assert Path(run["settings"]["data_dir"]) == tmp_path / "state" / "worker"
