"""`session-stream uninstall`: stop the service `install` set up and remove its unit (or
launchd agent). The state folder stays: the broker's data, the checkpoints and the logs."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from stream.commands.install import add_service_arguments, service_of
from stream.service.managers import ManagerError, manager_for


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_service_arguments(parser)


def main(args: argparse.Namespace, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """Exit 0 when removed (or there was nothing to remove), 1 when the manager refused."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    service = service_of(args)
    manager = manager_for(args.manager, service)
    try:
        removed = manager.uninstall()
    except ManagerError as error:
        print(f"session-stream uninstall: {error}", file=stderr)
        return 1
    said = f"stopped and removed {manager.path}" if removed else f"nothing at {manager.path}"
    print(f"session-stream uninstall: {said}; the state folder {service.state.root} is kept "
          "(the broker's data, checkpoints and logs: delete it to start over)", file=stdout)
    return 0
