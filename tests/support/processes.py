"""The process tree under /proc, for tests that check a stop leaves no process behind."""

from __future__ import annotations

from pathlib import Path


def start_time(pid: int) -> str | None:
    """A process's start time (field 22 of /proc/PID/stat), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def descendants(pid: int) -> dict[int, str]:
    """The processes below `pid` now, each with its start time (which tells it from a later
    process given the same pid)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rpartition(")")[2].split()[1])
            parents.setdefault(parent, []).append(int(entry.name))
    found: dict[int, str] = {}
    pending = list(parents.get(pid, []))
    while pending:
        child = pending.pop()
        started = start_time(child)
        if started is not None:
            found[child] = started
            pending += parents.get(child, [])
    return found
