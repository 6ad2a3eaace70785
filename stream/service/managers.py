"""The service managers `install` and `uninstall` drive: `systemctl --user` on Linux,
`launchctl` on macOS, each run as a command found on PATH (so a test can put a stand-in
first on PATH where no user session manager runs)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from stream.service.units import LAUNCHD_LABEL, UNIT_NAME, Service


class ManagerError(RuntimeError):
    """The service manager refused or is not there; the message says what to do."""


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL, timeout=120)
    except FileNotFoundError as error:
        raise ManagerError(f"{command[0]} is not on PATH") from error
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise ManagerError(f"`{' '.join(command)}` failed (exit {done.returncode}): "
                           f"{said[-1] if said else 'no output'}")
    return done


@dataclass(frozen=True)
class Systemd:
    service: Service

    @property
    def path(self) -> Path:
        return self.service.unit_path

    def install(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(self.service.systemd_unit())
        _run("systemctl", "--user", "daemon-reload")
        _run("systemctl", "--user", "enable", UNIT_NAME)
        # restart, not start: an install over an older one runs the new unit
        _run("systemctl", "--user", "restart", UNIT_NAME)

    def uninstall(self) -> bool:
        if not self.path.exists():
            return False
        _run("systemctl", "--user", "disable", "--now", UNIT_NAME, check=False)
        self.path.unlink()
        # without a user manager running there is nothing left to tell
        _run("systemctl", "--user", "daemon-reload", check=False)
        return True

    def notes(self) -> list[str]:
        return [f"logs: journalctl --user -u {UNIT_NAME}, and {self.service.state.root}/logs",
                "systemd stops a user's services at logout unless it lingers: "
                f"sudo loginctl enable-linger {os.environ.get('USER', '$USER')}"]


@dataclass(frozen=True)
class Launchd:
    service: Service

    @property
    def path(self) -> Path:
        return self.service.plist_path

    @property
    def target(self) -> str:
        return f"gui/{os.getuid()}"

    def install(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # an agent loaded before keeps its old definition until it is booted out
        _run("launchctl", "bootout", f"{self.target}/{LAUNCHD_LABEL}", check=False)
        self.path.write_bytes(self.service.launchd_plist())
        _run("launchctl", "bootstrap", self.target, str(self.path))

    def uninstall(self) -> bool:
        if not self.path.exists():
            return False
        _run("launchctl", "bootout", f"{self.target}/{LAUNCHD_LABEL}", check=False)
        self.path.unlink()
        return True

    def notes(self) -> list[str]:
        return [f"logs: {self.service.state.root}/logs"]


Manager = Systemd | Launchd


def manager_for(kind: str, service: Service) -> Manager:
    return Launchd(service) if kind == "launchd" else Systemd(service)
