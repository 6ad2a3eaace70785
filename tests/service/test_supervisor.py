"""The supervisor of `up`, with small Python processes for children: the start order, restarts
with backoff, the stop in reverse order, and no child left behind when `up` is killed."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from stream.service.layout import StateDir
from stream.service.supervisor import ChildSpec, Supervisor

# A child that notes when SIGTERM came and whether it was started again, then lives on.
CHILD = textwrap.dedent("""
    import os, signal, sys, time
    name, notes = sys.argv[1], sys.argv[2]
    def note(what):
        with open(notes, "a") as f:
            f.write(f"{time.monotonic():.3f} {name} {what}\\n")
    def stop(*_):
        note("stopping")
        time.sleep(0.2)
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    note("started")
    while True:
        time.sleep(0.1)
""")


def spec(name: str, notes: Path, *, code: str = CHILD, **options) -> ChildSpec:
    return ChildSpec(name, [sys.executable, "-c", code, name, str(notes)], dict(os.environ),
                     **options)


def notes_of(path: Path) -> list[tuple[str, str]]:
    if not path.exists():
        return []
    return [tuple(line.split(" ", 1)[1].split(" ", 1)) for line in path.read_text().splitlines()]


def wait_for(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_children_start_in_order_and_stop_in_reverse(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    supervisor = Supervisor(StateDir(tmp_path / "state"))
    # the second child starts only once the first is ready (as the worker waits for the broker)
    supervisor.start(spec("broker", notes, ready=lambda: ("broker", "started") in
                          notes_of(notes)), lambda: False)
    for name in ("worker", "source", "memory-writer"):
        supervisor.start(spec(name, notes), lambda: False)
    wait_for(lambda: len(notes_of(notes)) == 4)
    supervisor.stop_all()

    assert notes_of(notes)[0] == ("broker", "started")
    assert [name for name, what in notes_of(notes) if what == "stopping"] == [
        "memory-writer", "source", "worker", "broker"]
    assert all(child.process.poll() is not None for child in supervisor.children)
    # each child's output went to its own log in the state folder
    assert (tmp_path / "state" / "logs" / "worker.log").read_text().startswith(
        "--- ")


def test_a_child_that_exits_is_started_again_with_a_growing_backoff(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    crashing = CHILD.replace("while True:", "time.sleep(0.1)\nsys.exit(3)\nwhile True:")
    supervisor = Supervisor(StateDir(tmp_path / "state"))
    child = supervisor.start(spec("source", notes, code=crashing), lambda: False)
    until = time.monotonic() + 4.5
    supervisor.run(lambda: time.monotonic() > until)
    supervisor.stop_all()

    starts = [float(line.split()[0]) for line in notes.read_text().splitlines()
              if line.endswith("started")]
    # started, then again after 1 s, then after 2 s (each run 0.1 s and the start's cost)
    assert len(starts) == 3
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert 1.0 <= gaps[0] < 1.9 and 2.0 <= gaps[1] < 2.9
    assert (child.restarts, child.last_exit) == (2, 3)


def test_a_child_that_ignores_sigterm_is_killed_after_its_grace(tmp_path: Path) -> None:
    stubborn = CHILD.replace("signal.signal(signal.SIGTERM, stop)",
                             "signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    supervisor = Supervisor(StateDir(tmp_path / "state"))
    child = supervisor.start(spec("worker", tmp_path / "notes", code=stubborn, stop_grace=1.0),
                             lambda: False)
    wait_for((tmp_path / "notes").exists)
    started = time.monotonic()
    supervisor.stop_all()
    assert 1.0 <= time.monotonic() - started < 5.0
    assert child.process.returncode == -signal.SIGKILL


# `up` itself, reduced to its supervisor: two children, their pids printed, then supervision.
UP = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from stream.service.layout import StateDir
    from stream.service.supervisor import ChildSpec, Supervisor
    supervisor = Supervisor(StateDir(Path(sys.argv[1])))
    for name in ("broker", "worker"):
        child = supervisor.start(ChildSpec(name, [sys.executable, "-c",
                                 "import time; time.sleep(600)"], dict(os.environ)),
                                 lambda: False)
        print(child.pid, flush=True)
    supervisor.run(lambda: False)
""")


def test_no_child_outlives_a_supervisor_killed_with_sigkill(tmp_path: Path) -> None:
    up = subprocess.Popen([sys.executable, "-c", UP, str(tmp_path / "state")],
                          stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
    pids = [int(up.stdout.readline()) for _ in range(2)]
    assert all(_alive(pid) for pid in pids)
    up.kill()
    up.wait()
    wait_for(lambda: not any(_alive(pid) for pid in pids), timeout=10)


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent to read its exit."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
