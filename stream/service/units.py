"""The service definitions that run `session-stream up` at boot, as `openclaw gateway install`
does for OpenClaw: a systemd user unit on Linux, a launchd agent on macOS.

OpenClaw 2026.9.6 installs its gateway as the user unit `openclaw-gateway.service`
(`openclaw-gateway-<profile>.service` for a --profile; `src/daemon/constants.ts`) in
~/.config/systemd/user, and as the LaunchAgent `ai.openclaw.gateway` in ~/Library/LaunchAgents.
Ours is ordered after its unit where there is one, and wants nothing of it: `up` waits for a
gateway that comes late, and runs without one. launchd has no ordering; the waiting covers it.
"""

from __future__ import annotations

import os
import plistlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from stream.service.layout import StateDir

UNIT_NAME = "session-stream.service"
LAUNCHD_LABEL = "local.session-stream"
DESCRIPTION = "session-stream: OpenClaw transcripts cleaned before memory"
# What `up` needs to stop in order: each process's grace (stream/service/plan.py) and a margin.
STOP_TIMEOUT = 180
# Carried from the environment `install` runs in: how to reach the broker and OpenClaw, and
# where Java is. Secrets are not: a unit file is no place for them (the gateway token is read
# from openclaw.json; a SASL password goes in an EnvironmentFile of your own).
CARRIED = re.compile(r"^(SESSION_STREAM_\w+|OPENCLAW_STATE_DIR|OPENCLAW_CONFIG_PATH|"
                     r"OPENCLAW_PROFILE|XDG_STATE_HOME|JAVA_HOME|PATH)$")
SECRETS = {"SESSION_STREAM_SASL_PASSWORD", "OPENCLAW_GATEWAY_TOKEN", "OPENCLAW_GATEWAY_PASSWORD"}


@dataclass(frozen=True)
class Service:
    state: StateDir
    openclaw_state: Path
    home: Path

    @property
    def command(self) -> list[str]:
        """`session-stream up` of this very install, by absolute paths."""
        script = Path(sys.executable).parent / "session-stream"
        start = [str(script)] if script.is_file() else [sys.executable, "-m", "stream.cli"]
        return [*start, "up", "--state-dir", str(self.state.root),
                "--openclaw-state", str(self.openclaw_state)]

    def environment(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        environ = dict(os.environ) if environ is None else environ
        return {name: value for name, value in sorted(environ.items())
                if CARRIED.match(name) and name not in SECRETS and value}

    # --- systemd -----------------------------------------------------------------------------

    @property
    def unit_folder(self) -> Path:
        config = os.environ.get("XDG_CONFIG_HOME")
        return (Path(config) if config else self.home / ".config") / "systemd" / "user"

    @property
    def unit_path(self) -> Path:
        return self.unit_folder / UNIT_NAME

    def openclaw_unit(self) -> str | None:
        """The name of OpenClaw's gateway unit for this state folder, when it is installed."""
        profile = self.openclaw_state.name.removeprefix(".openclaw").removeprefix("-")
        name = f"openclaw-gateway-{profile}.service" if profile else "openclaw-gateway.service"
        return name if (self.unit_folder / name).is_file() else None

    def systemd_unit(self, environ: dict[str, str] | None = None) -> str:
        after = " ".join(filter(None, ("network-online.target", self.openclaw_unit())))
        lines = [
            "[Unit]",
            f"Description={DESCRIPTION}",
            f"After={after}",
            "Wants=network-online.target",
            "",
            "[Service]",
            # `$` expands in a command line, not in Environment=
            f"ExecStart={' '.join(_systemd_quote(a.replace('$', '$$')) for a in self.command)}",
            # `up` restarts its children itself; this is for `up` alone.
            "Restart=always",
            "RestartSec=5",
            # SIGTERM to `up` only, which stops its children in order; what is left after the
            # timeout is killed with the whole control group.
            "KillMode=mixed",
            f"TimeoutStopSec={STOP_TIMEOUT}",
            *(f"Environment={_systemd_quote(f'{k}={v}')}"
              for k, v in self.environment(environ).items()),
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
        return "\n".join(lines)

    # --- launchd -----------------------------------------------------------------------------

    @property
    def plist_path(self) -> Path:
        return self.home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"

    def launchd_plist(self, environ: dict[str, str] | None = None) -> bytes:
        agent = {
            "Label": LAUNCHD_LABEL,
            "ProgramArguments": self.command,
            "WorkingDirectory": str(self.state.root),
            "RunAtLoad": True,
            "KeepAlive": True,
            "ThrottleInterval": 10,
            "ExitTimeOut": STOP_TIMEOUT,
            "ProcessType": "Background",
            "StandardInPath": "/dev/null",
            # `up` writes its own lines to logs/up.log; this catches what comes before
            "StandardOutPath": str(self.state.log("launchd")),
            "StandardErrorPath": str(self.state.log("launchd")),
            "EnvironmentVariables": self.environment(environ),
        }
        return plistlib.dumps(agent)


def _systemd_quote(value: str) -> str:
    """One word of a unit's command line or Environment=, as systemd reads it back."""
    if "\n" in value or "\r" in value:
        raise ValueError(f"a line break cannot go into a unit file: {value!r}")
    value = value.replace("%", "%%")
    if not re.search(r'[\s"\\]', value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
