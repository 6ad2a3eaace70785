"""`session-stream install`: run `session-stream up` as a service that starts at boot, as
`openclaw gateway install` does for OpenClaw.

Linux: a systemd user unit (~/.config/systemd/user/session-stream.service, ordered after
OpenClaw's gateway unit where there is one), enabled and started with `systemctl --user`.
macOS: a launchd agent (~/Library/LaunchAgents/local.session-stream.plist), bootstrapped with
`launchctl`. The unit runs this install's `session-stream up` with the same state folder and
OpenClaw, and the SESSION_STREAM_* settings of the environment `install` runs in (no secret).
`--print` shows the definition without installing it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from stream.openclaw import add_state_argument, default_state_dir
from stream.service.layout import StateDir, add_state_dir_argument
from stream.service.managers import ManagerError, manager_for
from stream.service.units import Service


def add_service_arguments(parser: argparse.ArgumentParser) -> None:
    add_state_dir_argument(parser)
    add_state_argument(parser)
    parser.add_argument(
        "--manager", choices=("systemd", "launchd"),
        default="launchd" if sys.platform == "darwin" else "systemd",
        help="the service manager (default: launchd on macOS, systemd elsewhere)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_service_arguments(parser)
    parser.add_argument("--print", action="store_true",
                        help="print the unit (or plist) and install nothing")


def service_of(args: argparse.Namespace) -> Service:
    openclaw = (args.openclaw_state or default_state_dir()).expanduser().absolute()
    return Service(StateDir.of(args.state_dir), openclaw, Path.home())


def main(args: argparse.Namespace, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """Exit 0 once installed and started, 1 when the service manager refused (the file is
    left for a look, and the line says where)."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    service = service_of(args)
    manager = manager_for(args.manager, service)
    if args.print:
        text = (service.launchd_plist().decode() if args.manager == "launchd"
                else service.systemd_unit())
        print(text, file=stdout, end="")
        return 0
    service.state.root.mkdir(parents=True, exist_ok=True)
    try:
        manager.install()
    except ManagerError as error:
        print(f"session-stream install: {error}; the definition is in {manager.path}; "
              "`session-stream up` runs the same in the foreground", file=stderr)
        return 1
    print(f"session-stream install: {manager.path} installed and started: session-stream up "
          f"with the state folder {service.state.root}", file=stdout)
    for note in manager.notes():
        print(f"  {note}", file=stdout)
    return 0
