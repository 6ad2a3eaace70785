"""Where a session's file goes: one folder, a folder per agent, each agent's own workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stream.consumers.memory_writer.files import MemoryWriter
from stream.consumers.memory_writer.folders import AgentWorkspaces, FolderPerAgent
from stream.openclaw import OpenClaw
from tests.support.memory import raw, user


def agent_headers(agent: str | None = None, key: str | None = None) -> tuple:
    headers = []
    if agent is not None:
        headers.append(("openclaw-agent-id", agent.encode()))
    if key is not None:
        headers.append(("openclaw-session-key", key.encode()))
    return tuple(headers)


def test_a_folder_per_agent_keeps_each_agents_sessions_apart(tmp_path: Path) -> None:
    writer = MemoryWriter(FolderPerAgent(tmp_path / "memory"))
    writer.write([
        ("s-1", raw(user("from main")), agent_headers("main")),
        ("s-2", raw(user("from ops")), agent_headers("ops")),
        ("s-3", raw(user("ops by its key")), agent_headers(key="agent:ops:telegram:direct:7")),
        ("s-4", raw(user("nothing said")), ()),
    ])
    found = sorted(p.relative_to(tmp_path / "memory").as_posix()
                   for p in (tmp_path / "memory").rglob("*.md"))
    # a session its records say nothing of belongs to OpenClaw's default agent
    assert found == ["main/s-1.md", "main/s-4.md", "ops/s-2.md", "ops/s-3.md"]


def test_an_agent_id_names_no_folder_outside(tmp_path: Path) -> None:
    writer = MemoryWriter(FolderPerAgent(tmp_path / "memory"))
    writer.write([("s-1", raw(user("hi")), agent_headers("../../escape"))])
    (written,) = (tmp_path / "memory").rglob("*.md")
    assert written.parent.parent == tmp_path / "memory"


def openclaw_with(tmp_path: Path, config: dict) -> OpenClaw:
    state = tmp_path / "openclaw"
    state.mkdir()
    (state / "openclaw.json").write_text(json.dumps(config))
    return OpenClaw.at(state)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # OpenClaw's defaults: main in <state>/workspace, another agent beside it
        ({}, {"main": "openclaw/workspace", "ops": "openclaw/workspace-ops"}),
        ({"agents": {"defaults": {"workspace": "{tmp}/ws"}}},
         {"main": "ws", "ops": "ws/ops"}),
        ({"agents": {"list": [{"id": "main"}, {"id": "ops", "workspace": "{tmp}/ops-ws"}]}},
         {"main": "openclaw/workspace", "ops": "ops-ws"}),
    ],
    ids=["defaults", "defaults-workspace", "listed"],
)
def test_each_agents_sessions_go_to_its_own_workspace(tmp_path: Path, config: dict,
                                                      expected: dict[str, str]) -> None:
    openclaw = openclaw_with(tmp_path, json.loads(json.dumps(config).replace("{tmp}",
                                                                             str(tmp_path))))
    writer = MemoryWriter(AgentWorkspaces(openclaw))
    writer.write([(f"s-{agent}", raw(user(f"from {agent}")), agent_headers(agent))
                  for agent in expected])
    for agent, workspace in expected.items():
        path = tmp_path / workspace / "memory" / "session-stream" / f"s-{agent}.md"
        assert f"from {agent}" in path.read_text()
