"""The context engine plugin (openclaw-plugin/) on a real gateway: its install, the copies a buggy
writer leaves in a transcript, what the model stand-in was sent, and the latency measurement."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.support.openclaw.gateway import Gateway
from tests.support.openclaw.install import REPOSITORY
from tests.support.openclaw.model import TIME_ENVELOPE, Request

PLUGIN = REPOSITORY / "openclaw-plugin"
DOCS = REPOSITORY / "docs" / "context-engine.md"
ENGINE = "session-stream"
WRITE_COPIES = Path(__file__).with_name("write_copies.mjs")
DEGRADED = re.compile(r'Context engine "session-stream" degraded to "legacy"')
FAILED = re.compile(r"context engine assemble failed|quarantining it|durable turn advancement "
                    r"remains queued")


def built_plugin() -> Path:
    """The plugin folder, once `make plugin` has built what OpenClaw loads."""
    if not (PLUGIN / "dist" / "index.js").is_file():
        raise AssertionError(f"{PLUGIN}/dist/index.js is missing: run `make plugin`")
    return PLUGIN


def documented_wiring() -> tuple[list[str], dict[str, Any]]:
    """The commands and the openclaw.json of docs/context-engine.md's wiring section."""
    section = DOCS.read_text().split("## Wiring", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.DOTALL)
    commands = [line.split("#")[0].strip() for kind, text in blocks if kind == "sh"
                for line in text.splitlines() if line.strip()]
    (config,) = [json.loads(text) for kind, text in blocks if kind == "json"]
    return commands, config


def install(gateway: Gateway, config: dict[str, Any]) -> dict[str, Any]:
    """docs/context-engine.md's wiring: `openclaw plugins install -l` (without a terminal to
    confirm it) and its openclaw.json, the plugin's settings replaced by `config`; for the
    gateway's next start. The openclaw.json OpenClaw validated."""
    commands, documented = documented_wiring()
    assert 'openclaw plugins install -l "$PWD/openclaw-plugin"' in commands, commands
    gateway.cli("plugins", "install", "-l", str(built_plugin()), "--force",
                "--accept-capabilities")
    settings = json.loads(gateway.config_path.read_text())
    plugins = settings.setdefault("plugins", {})
    plugins.setdefault("slots", {}).update(documented["plugins"]["slots"])
    entry = documented["plugins"]["entries"][ENGINE]
    plugins.setdefault("entries", {})[ENGINE] = {**entry, "config": {**entry["config"], **config}}
    gateway.config_path.write_text(json.dumps(settings, indent=2))
    gateway.cli("config", "validate")
    return settings


def write_copies(gateway: Gateway, plan: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Copies written into the sessions through OpenClaw's own SDK (write_copies.mjs)."""
    package = gateway.install.entry.parent
    done = subprocess.run(
        [str(gateway.install.node), str(WRITE_COPIES), str(package), json.dumps(plan)],
        env=gateway.environment(), cwd=gateway.home, capture_output=True, text=True,
        timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def measure_assemble(gateway: Gateway, config: dict[str, Any], sessions: list[str],
                     rounds: int) -> dict[str, Any]:
    """openclaw-plugin/bench/assemble.mjs against the gateway's store and the service."""
    package = gateway.install.entry.parent
    done = subprocess.run(
        [str(gateway.install.node), str(PLUGIN / "bench" / "assemble.mjs"), str(package),
         json.dumps(config), json.dumps(sessions), str(rounds)],
        env=gateway.environment(), cwd=gateway.home, capture_output=True, text=True,
        timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def request_for(requests: list[Request], prompt: str) -> Request:
    """The model request of the turn whose user wrote `prompt` (after what OpenClaw may fold
    in front of it)."""
    (request,) = [r for r in requests if r.prompt == prompt or r.prompt.endswith(f"\n{prompt}")]
    return request


def texts(request: Request, role: str) -> list[str]:
    """The text of every text block (or string content) of the request's `role` messages, as
    sent, OpenClaw's time envelope left out."""
    found = []
    for message in request.body.get("messages") or []:
        if message.get("role") != role:
            continue
        content = message.get("content")
        blocks = [content] if isinstance(content, str) else [
            b.get("text", "") for b in content or [] if isinstance(b, dict)
            and b.get("type") == "text"]
        found += [TIME_ENVELOPE.sub("", text) for text in blocks]
    return found


def copies_sent(request: Request, role: str, text: str) -> int:
    """How many times the model was sent `text` in `role` messages (a block of its own, or
    folded into a longer one)."""
    return sum(sent.count(text) for sent in texts(request, role))


def thinking_blocks(request: Request) -> list[dict[str, Any]]:
    return [b for m in request.body.get("messages") or [] if m.get("role") == "assistant"
            for b in m.get("content") or [] if isinstance(b, dict) and b.get("type") == "thinking"]


def estimated_tokens(request: Request) -> int:
    """The conversation the request sends (its messages but a system message, as JSON), in
    OpenClaw's own estimate: characters / 4."""
    messages = [m for m in request.body.get("messages") or [] if m.get("role") != "system"]
    return math.ceil(len(json.dumps(messages, ensure_ascii=False)) / 4)


def system_prompt(request: Request) -> str:
    """The system prompt: Anthropic's `system` blocks, or a completions request's system
    message."""
    system = request.body.get("system")
    if system is None:
        system = next((m.get("content") for m in request.body.get("messages") or []
                       if m.get("role") == "system"), "")
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    return system


def trace(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]
