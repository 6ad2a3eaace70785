"""Where the agent stores are: the gateway says what changed, the store holds the entries.

OpenClaw keeps one SQLite store per agent at <state>/agents/<agent>/agent/openclaw-agent.sqlite,
the state folder being $OPENCLAW_STATE_DIR, else ~/.openclaw (what OpenClaw itself resolves; a
--profile NAME gateway uses ~/.openclaw-NAME, given here with --state-dir). Every agent there
is followed, or only the --agent ones; --store names one store file directly. OpenClaw creates
an agent's store with its first session, so stores are looked for again on every sweep: an
agent added later, or a gateway started on an empty state folder, is picked up as it comes.
A state folder that is not there is refused at start-up: that is a gateway on another machine
(or a wrong path), and without the store the source has nothing to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from stream.openclaw import STORE_NAME, default_state_dir
from stream.sources.base import SourceError
from stream.sources.store.reader import agent_of_path

AGENT_STORE = f"agent/{STORE_NAME}"  # under agents/<agent>/


@dataclass(frozen=True)
class Stores:
    """The store files to follow: one given file, or the agents of a state folder."""

    state_dir: Path | None
    store: Path | None
    agents: tuple[str, ...]

    @classmethod
    def of(cls, state_dir: Path | None, store: Path | None, agents: list[str]) -> Stores:
        """Raises SourceError naming what was looked for when it cannot be readable."""
        if store is not None:
            if not store.is_file():
                raise SourceError(f"no agent store at {store}{_REMOTE_HINT}")
            return cls(None, store, tuple(agents))
        state = state_dir if state_dir is not None else default_state_dir()
        if not state.is_dir():
            raise SourceError(f"no OpenClaw state folder at {state}{_REMOTE_HINT}")
        return cls(state, None, tuple(agents))

    @property
    def origin(self) -> Path:
        """What the checkpoint belongs to."""
        return (self.store or self.state_dir or default_state_dir()).resolve()

    @cached_property
    def store_agent(self) -> str | None:
        """The agent of the --store file (None without one). Kept: every event asks whether it
        concerns this source, and the agent of a path takes resolving it (system calls per part)."""
        if self.store is None:
            return None
        agent = self.agents[0] if len(self.agents) == 1 else agent_of_path(self.store)
        return agent or "main"

    def found(self) -> dict[str, Path]:
        """Agent id -> store file, for those that exist now."""
        if self.store_agent is not None:
            assert self.store is not None
            return {self.store_agent: self.store}
        assert self.state_dir is not None
        root = self.state_dir / "agents"
        if self.agents:
            paths = {agent: root / agent / "agent" / STORE_NAME for agent in self.agents}
            return {agent: path for agent, path in paths.items() if path.is_file()}
        return {path.parent.parent.name: path for path in sorted(root.glob(f"*/{AGENT_STORE}"))}

    def follows(self, agent: str) -> bool:
        """Whether an agent's events concern this source (its store may not exist yet)."""
        if self.store_agent is not None:
            return agent == self.store_agent
        return not self.agents or agent in self.agents

    def describe(self) -> str:
        if self.store is not None:
            return str(self.store)
        assert self.state_dir is not None
        agents = ", ".join(self.agents) if self.agents else "*"
        return str(self.state_dir / "agents" / f"{{{agents}}}" / "agent" / STORE_NAME)


_REMOTE_HINT = (
    ": the gateway source reads each entry from the agent's store and cannot run without it. "
    "Point --state-dir (or $OPENCLAW_STATE_DIR) or --store at the gateway's state folder; for "
    "a gateway on another machine, --projected publishes its display projection instead, "
    "which is not the transcript (see docs/sources.md)"
)
