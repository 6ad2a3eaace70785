"""What session-stream reads of one OpenClaw installation on this machine: its state folder and
config, how to reach its gateway, where each agent keeps its transcripts and its workspace.

The rules are OpenClaw's own (2026.9.6, `src/config/paths.ts`, `src/agents/agent-scope-config.ts`):
the state folder is $OPENCLAW_STATE_DIR, else ~/.openclaw (~/.openclaw-NAME for a --profile
NAME gateway: give that folder); the config is $OPENCLAW_CONFIG_PATH, else openclaw.json in it.
The config is read as JSON; OpenClaw also accepts JSON5 (comments, trailing commas), which is
then not read, and the defaults apply (`config_problem` says so).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_GATEWAY_PORT = 18789
DEFAULT_AGENT = "main"
TOKEN_ENV = "OPENCLAW_GATEWAY_TOKEN"
PASSWORD_ENV = "OPENCLAW_GATEWAY_PASSWORD"
STORE_NAME = "openclaw-agent.sqlite"


def add_state_argument(parser: argparse.ArgumentParser, holding: str = "",
                       only: str = "") -> None:
    """`--openclaw-state DIR`, for the commands that read an OpenClaw install: `holding` says
    what they read there, `only` when they read it."""
    parser.add_argument(
        "--openclaw-state", type=Path, default=None, metavar="DIR",
        help=f"{only}OpenClaw's state folder{holding} (default: $OPENCLAW_STATE_DIR, else "
        "~/.openclaw)",
    )


def default_state_dir() -> Path:
    given = os.environ.get("OPENCLAW_STATE_DIR")
    return Path(given).expanduser() if given else Path.home() / ".openclaw"


@dataclass(frozen=True)
class OpenClaw:
    state_dir: Path
    config: dict[str, Any] = field(default_factory=dict)
    config_problem: str | None = None  # why the config was not read, None when it was

    @classmethod
    def at(cls, state_dir: Path | None = None) -> OpenClaw:
        state = (state_dir or default_state_dir()).expanduser().absolute()
        given = os.environ.get("OPENCLAW_CONFIG_PATH")
        path = Path(given).expanduser() if given and state_dir is None else state / "openclaw.json"
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(state)
        except (OSError, UnicodeDecodeError, ValueError) as error:
            return cls(state, {}, f"{path} was not read ({error}); OpenClaw's defaults apply")
        if not isinstance(config, dict):
            return cls(state, {}, f"{path} holds no JSON object; OpenClaw's defaults apply")
        return cls(state, config)

    # --- the gateway -----------------------------------------------------------------------

    @property
    def gateway_url(self) -> str:
        port = _get(self.config, "gateway", "port")
        if not isinstance(port, int):
            port = int(os.environ.get("OPENCLAW_GATEWAY_PORT") or DEFAULT_GATEWAY_PORT)
        return f"ws://127.0.0.1:{port}"

    def gateway_secret(self) -> tuple[str, str] | None:
        """(the environment variable the gateway source reads, its value): the environment's,
        else a literal token or password in the config (not a `${VAR}` reference or a secret
        reference object, which only OpenClaw resolves); None when there is none."""
        for name in (TOKEN_ENV, PASSWORD_ENV):
            if os.environ.get(name):
                return name, os.environ[name]
        for key, name in (("token", TOKEN_ENV), ("password", PASSWORD_ENV)):
            value = _get(self.config, "gateway", "auth", key)
            if isinstance(value, str) and value.strip() and "${" not in value:
                return name, value.strip()
        return None

    # --- transcripts -----------------------------------------------------------------------

    def stores(self) -> dict[str, Path]:
        """Agent id -> its SQLite transcript store (OpenClaw 2026.8+), those there now."""
        found = sorted((self.state_dir / "agents").glob(f"*/agent/{STORE_NAME}"))
        return {path.parent.parent.name: path for path in found}

    def has_session_files(self) -> bool:
        """Whether an agent keeps JSONL transcripts (OpenClaw up to 2026.7)."""
        return any((self.state_dir / "agents").glob("*/sessions/*.jsonl*"))

    # --- workspaces ------------------------------------------------------------------------

    def workspace(self, agent: str) -> Path:
        """The agent's workspace folder, where OpenClaw's memory search indexes `memory/`."""
        entry = self._agent_entry(agent)
        configured = entry.get("workspace") if entry else None
        if isinstance(configured, str) and configured.strip():
            return _user_path(configured)
        fallback = _get(self.config, "agents", "defaults", "workspace")
        if agent == self.default_agent:
            if isinstance(fallback, str) and fallback.strip():
                return _user_path(fallback)
            given = os.environ.get("OPENCLAW_WORKSPACE_DIR")
            return _user_path(given) if given else self.state_dir / "workspace"
        if isinstance(fallback, str) and fallback.strip():
            return _user_path(fallback) / agent
        return self.state_dir / f"workspace-{agent}"

    @property
    def default_agent(self) -> str:
        """The agent that owns the default workspace: the one marked `default`, else the only
        one listed, else `main`."""
        entries = self._agent_entries()
        for entry in entries:
            if entry.get("default") is True:
                return str(entry["id"])
        return str(entries[0]["id"]) if len(entries) == 1 else DEFAULT_AGENT

    def _agent_entries(self) -> list[dict[str, Any]]:
        listed = _get(self.config, "agents", "list")
        if not isinstance(listed, list):
            return []
        return [e for e in listed if isinstance(e, dict) and isinstance(e.get("id"), str)]

    def _agent_entry(self, agent: str) -> dict[str, Any] | None:
        return next((e for e in self._agent_entries() if e["id"] == agent), None)


def _get(config: dict[str, Any], *keys: str) -> object:
    value: object = config
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _user_path(text: str) -> Path:
    return Path(text.strip()).expanduser().absolute()
