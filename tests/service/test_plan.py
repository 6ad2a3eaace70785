"""Which source `up` runs for the OpenClaw it finds, and with what."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stream.openclaw import OpenClaw
from stream.service.layout import StateDir
from stream.service.plan import choose_source
from tests.support.sqlite_store import create_openclaw_store


@pytest.fixture
def openclaw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("OPENCLAW_GATEWAY_TOKEN", "OPENCLAW_GATEWAY_PASSWORD", "OPENCLAW_STATE_DIR",
                 "OPENCLAW_CONFIG_PATH", "OPENCLAW_GATEWAY_PORT"):
        monkeypatch.delenv(name, raising=False)
    state = tmp_path / "openclaw"
    (state / "agents").mkdir(parents=True)
    return state


def configure(state: Path, config: dict) -> None:
    (state / "openclaw.json").write_text(json.dumps(config))


def store(state: Path, agent: str) -> Path:
    path = state / "agents" / agent / "agent" / "openclaw-agent.sqlite"
    create_openclaw_store(path).close()
    return path


def choose(state: Path, tmp_path: Path):
    return choose_source(OpenClaw.at(state), StateDir(tmp_path / "ours"), {"BASE": "1"})


def test_nothing_written_yet_chooses_nothing(openclaw: Path, tmp_path: Path) -> None:
    configure(openclaw, {"gateway": {"auth": {"token": "t0k"}}})
    assert choose(openclaw, tmp_path) is None


def test_a_store_and_the_gateways_token_choose_the_gateway_source(openclaw: Path,
                                                                    tmp_path: Path) -> None:
    configure(openclaw, {"gateway": {"port": 19001, "auth": {"mode": "token", "token": "t0k"}}})
    store(openclaw, "main")
    chosen = choose(openclaw, tmp_path)
    (child,) = chosen.children
    assert chosen.kind == "gateway"
    args = child.argv[child.argv.index("gateway"):]
    assert args == ["gateway", "--url", "ws://127.0.0.1:19001", "--state-dir", str(openclaw),
                    "--checkpoint", str(tmp_path / "ours" / "sources" / "gateway.checkpoint.json"),
                    "--startup-deadline", "0"]
    # the secret goes by the environment, never on the command line
    assert child.env == {"BASE": "1", "OPENCLAW_GATEWAY_TOKEN": "t0k"}


def test_the_environments_secret_wins_and_a_reference_is_not_a_token(
        openclaw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure(openclaw, {"gateway": {"auth": {"token": "${GATEWAY_TOKEN}"}}})
    store(openclaw, "main")
    assert choose(openclaw, tmp_path).kind == "follow-sqlite"  # no secret known
    monkeypatch.setenv("OPENCLAW_GATEWAY_PASSWORD", "pw")
    (child,) = choose(openclaw, tmp_path).children
    assert child.env["OPENCLAW_GATEWAY_PASSWORD"] == "pw"
    assert "--url" in child.argv and "ws://127.0.0.1:18789" in child.argv  # OpenClaw's port


def test_stores_without_a_secret_get_a_follower_each(openclaw: Path, tmp_path: Path) -> None:
    main, ops = store(openclaw, "main"), store(openclaw, "ops")
    chosen = choose(openclaw, tmp_path)
    assert chosen.kind == "follow-sqlite"
    assert [child.name for child in chosen.children] == ["source-main", "source-ops"]
    assert [child.argv[child.argv.index("follow-sqlite") + 1] for child in chosen.children] == [
        str(main), str(ops)]
    assert set(chosen.checkpoints) == {"main", "ops"}


def test_session_files_choose_follow(openclaw: Path, tmp_path: Path) -> None:
    sessions = openclaw / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "s-1.jsonl").write_text("{}\n")
    chosen = choose(openclaw, tmp_path)
    (child,) = chosen.children
    assert chosen.kind == "follow"
    assert child.argv[child.argv.index("follow") + 1] == str(openclaw / "agents")


def test_a_config_openclaw_accepts_but_json_does_not_is_said(openclaw: Path) -> None:
    (openclaw / "openclaw.json").write_text("{gateway: {port: 19001}, // JSON5\n}")
    found = OpenClaw.at(openclaw)
    assert found.gateway_url == "ws://127.0.0.1:18789"
    assert "openclaw.json was not read" in found.config_problem
