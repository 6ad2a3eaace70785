"""The state folder of `session-stream up`: everything it keeps, under one folder, by absolute
paths, so nothing depends on the folder a command was started from.

    <state>/kafka/            the durable broker: server.properties, data/ (tansu/: memory-only)
    <state>/worker/           the worker's data folder
    <state>/sources/          each source's checkpoint
    <state>/logs/<name>.log   each process's output, `up`'s own lines in up.log
    <state>/up.json           what `up` runs now: the broker's URL, the processes and their pids

The default is $SESSION_STREAM_STATE_DIR, else $XDG_STATE_HOME/session-stream, else
~/.local/state/session-stream (XDG's place for state that outlives a restart, on macOS too).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV = "SESSION_STREAM_STATE_DIR"
RUN_FILE = "up.json"
# A log past this size is moved to <name>.log.1 when its process starts again: a service
# that runs for months keeps two of them per process, not everything it ever wrote.
LOG_ROTATE_BYTES = 20 * 1024 * 1024


def default_state_dir() -> Path:
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state") / "session-stream"


def add_state_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir", type=Path, default=None, metavar="DIR",
        help=f"where the broker, the worker and the sources keep their state (default: ${ENV}, "
        "else $XDG_STATE_HOME/session-stream, else ~/.local/state/session-stream)",
    )


@dataclass(frozen=True)
class StateDir:
    root: Path

    @classmethod
    def of(cls, given: Path | None) -> StateDir:
        return cls((given or default_state_dir()).expanduser().absolute())

    def broker(self, kind: str) -> Path:
        return self.root / kind

    @property
    def worker_data(self) -> Path:
        return self.root / "worker"

    def checkpoint(self, source: str) -> Path:
        return self.root / "sources" / f"{source}.checkpoint.json"

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    @property
    def run_file(self) -> Path:
        return self.root / RUN_FILE

    def open_log(self, name: str):
        """The process's log, appended to; moved aside first when it grew too large."""
        path = self.log(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > LOG_ROTATE_BYTES:
            path.replace(path.with_name(path.name + ".1"))
        return path.open("ab")

    def write_run(self, run: dict[str, Any]) -> None:
        """up.json, replaced whole: `status` never reads half of it."""
        self.root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=self.root, delete=False,
                                         prefix=".up.", suffix=".tmp") as handle:
            json.dump(run, handle, indent=2)
        os.replace(handle.name, self.run_file)

    def read_run(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.run_file.read_text())
        except (FileNotFoundError, ValueError):
            return None
