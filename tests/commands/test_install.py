"""`install` and `uninstall`: the systemd user unit (checked by systemd's own
`systemd-analyze verify`) and the launchd agent (parsed with plistlib: this machine has no
launchctl).

What is faked: CI runs no user session manager (`systemctl --user` answers "Failed to connect
to bus"), and Linux has no launchctl, so both are stand-ins first on PATH that record how they
were called and answer as the real ones do when they succeed (or fail, where a test says so).
HOME is a temporary folder: the unit and the plist land where they would in a user's home.
"""

from __future__ import annotations

import argparse
import io
import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stream.commands import install, uninstall
from stream.service.layout import StateDir
from stream.service.units import Service


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return home


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """systemctl and launchctl stand-ins: each call one line of `calls`; exit as $FAKE_EXIT."""
    bin_dir, log = tmp_path / "fake-bin", tmp_path / "calls"
    bin_dir.mkdir()
    for name in ("systemctl", "launchctl"):
        fake = bin_dir / name
        fake.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\n'
                        'if [ -n "$FAKE_EXIT" ]; then echo "Failed to connect to bus" >&2; '
                        'exit "$FAKE_EXIT"; fi\n')
        fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    log.touch()
    return log


def run(module, argv: list[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = module.main(parser.parse_args(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def service(tmp_path: Path, home: Path, openclaw: Path | None = None) -> Service:
    return Service(StateDir(tmp_path / "state"), openclaw or home / ".openclaw", home)


# --- the systemd unit ------------------------------------------------------------------------


def verify(unit: Path, tmp_path: Path) -> tuple[int, str]:
    """`systemd-analyze --user verify`: its exit code and what it says of the unit (0 and
    nothing when the unit is right)."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is needed (Debian: apt-get install systemd)"
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    done = subprocess.run([analyze, "--user", "verify", str(unit)], capture_output=True,
                          text=True, env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
                          check=False)
    return done.returncode, (done.stdout + done.stderr).strip()


def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path, home: Path) -> None:
    (home / ".openclaw").mkdir()
    unit = tmp_path / "session-stream.service"
    text = service(tmp_path, home, tmp_path / "open claw 100%").systemd_unit(
        {"SESSION_STREAM_BROKER": "kafka://10.0.0.5:9092", "PATH": "/usr/bin:/bin"})
    unit.write_text(text)
    assert verify(unit, tmp_path) == (0, "")
    # what systemd would run: this install's command, the paths kept whole
    assert f"ExecStart={Path(sys.executable).parent / 'session-stream'} up --state-dir " in text
    assert '--openclaw-state "' + str(tmp_path / "open claw 100%%") + '"' in text


def test_a_broken_unit_is_what_verify_reports(tmp_path: Path) -> None:
    """The check above can fail: systemd-analyze speaks up on a unit it cannot use."""
    unit = tmp_path / "session-stream.service"
    unit.write_text("[Service]\nExecStart=relative/path up\nRestart=alwayz\n")
    code, said = verify(unit, tmp_path)
    assert code != 0 and "relative/path" in said


def test_the_unit_comes_after_openclaws_gateway_unit_where_there_is_one(
        tmp_path: Path, home: Path) -> None:
    units = home / ".config" / "systemd" / "user"
    assert "openclaw-gateway" not in service(tmp_path, home).systemd_unit({})
    units.mkdir(parents=True)
    (units / "openclaw-gateway.service").write_text("[Unit]\n")
    (units / "openclaw-gateway-work.service").write_text("[Unit]\n")
    assert "After=network-online.target openclaw-gateway.service\n" in service(
        tmp_path, home).systemd_unit({})
    # a --profile work gateway keeps its state in ~/.openclaw-work, under its own unit
    assert "After=network-online.target openclaw-gateway-work.service\n" in service(
        tmp_path, home, home / ".openclaw-work").systemd_unit({})


def test_the_unit_carries_settings_but_no_secret(tmp_path: Path, home: Path) -> None:
    text = service(tmp_path, home).systemd_unit({
        "SESSION_STREAM_BROKER": "kafka://10.0.0.5:9092", "JAVA_HOME": "/opt/jdk 17",
        "SESSION_STREAM_SASL_PASSWORD": "hunter2", "OPENCLAW_GATEWAY_TOKEN": "t0k",
        "AWS_SECRET_ACCESS_KEY": "x"})
    assert "Environment=SESSION_STREAM_BROKER=kafka://10.0.0.5:9092\n" in text
    assert 'Environment="JAVA_HOME=/opt/jdk 17"\n' in text
    assert "hunter2" not in text and "t0k" not in text and "AWS" not in text


def test_install_writes_enables_and_starts_the_unit(tmp_path: Path, home: Path,
                                                    calls: Path) -> None:
    code, out, _ = run(install, ["--state-dir", str(tmp_path / "state"), "--manager", "systemd"])
    unit = home / ".config" / "systemd" / "user" / "session-stream.service"
    assert code == 0
    assert calls.read_text().splitlines() == [
        "systemctl --user daemon-reload",
        "systemctl --user enable session-stream.service",
        "systemctl --user restart session-stream.service",
    ]
    assert verify(unit, tmp_path) == (0, "")
    assert str(unit) in out and "loginctl enable-linger" in out
    assert (tmp_path / "state").is_dir()


def test_install_says_where_the_unit_is_when_systemd_refuses(
        tmp_path: Path, home: Path, calls: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_EXIT", "1")
    code, _, err = run(install, ["--state-dir", str(tmp_path / "state"), "--manager", "systemd"])
    assert code == 1
    assert "Failed to connect to bus" in err
    assert str(home / ".config" / "systemd" / "user" / "session-stream.service") in err


def test_uninstall_stops_and_removes_the_unit_and_keeps_the_state(
        tmp_path: Path, home: Path, calls: Path) -> None:
    state = tmp_path / "state"
    run(install, ["--state-dir", str(state), "--manager", "systemd"])
    (state / "kafka").mkdir()
    calls.write_text("")
    code, out, _ = run(uninstall, ["--state-dir", str(state), "--manager", "systemd"])
    assert code == 0
    assert calls.read_text().splitlines() == [
        "systemctl --user disable --now session-stream.service",
        "systemctl --user daemon-reload",
    ]
    assert not (home / ".config" / "systemd" / "user" / "session-stream.service").exists()
    assert (state / "kafka").is_dir() and "is kept" in out


# --- the launchd agent -----------------------------------------------------------------------


def test_the_launchd_agent_runs_up_at_load_and_keeps_it_alive(tmp_path: Path, home: Path,
                                                              calls: Path) -> None:
    code, _, _ = run(install, ["--state-dir", str(tmp_path / "state"), "--manager", "launchd",
                               "--openclaw-state", str(home / ".openclaw")])
    plist = home / "Library" / "LaunchAgents" / "local.session-stream.plist"
    agent = plistlib.loads(plist.read_bytes())
    assert code == 0
    assert agent["Label"] == "local.session-stream"
    assert agent["ProgramArguments"][1:] == ["up", "--state-dir", str(tmp_path / "state"),
                                            "--openclaw-state", str(home / ".openclaw")]
    assert (agent["RunAtLoad"], agent["KeepAlive"]) == (True, True)
    assert agent["StandardOutPath"] == str(tmp_path / "state" / "logs" / "launchd.log")
    uid = os.getuid()
    assert calls.read_text().splitlines() == [
        f"launchctl bootout gui/{uid}/local.session-stream",
        f"launchctl bootstrap gui/{uid} {plist}",
    ]
    calls.write_text("")
    assert run(uninstall, ["--state-dir", str(tmp_path / "state"), "--manager", "launchd"])[0] == 0
    assert calls.read_text().splitlines() == [f"launchctl bootout gui/{uid}/local.session-stream"]
    assert not plist.exists()
