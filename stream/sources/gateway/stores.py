"""Where the agent stores are: the gateway says what changed, the store holds the entries.

OpenClaw keeps one SQLite store per agent at <state>/agents/<agent>/agent/openclaw-agent.sqlite,
the state folder being $OPENCLAW_STATE_DIR, else ~/.openclaw (what OpenClaw itself resolves; a
--profile NAME gateway uses ~/.openclaw-NAME, given here with --state-dir). Every agent found
there at start-up is followed, or only the --agent ones; --store names one store file directly.
"""

from __future__ import annotations

import os
from pathlib import Path

from stream.sources.publish import SourceError
from stream.sources.transcript_store import agent_of_path

STORE_NAME = "openclaw-agent.sqlite"


def default_state_dir() -> Path:
    given = os.environ.get("OPENCLAW_STATE_DIR")
    return Path(given).expanduser() if given else Path.home() / ".openclaw"


def find_stores(state_dir: Path | None, store: Path | None, agents: list[str]) -> dict[str, Path]:
    """Agent id -> store file. Raises SourceError naming what was looked for when none is
    readable: the store is the truth, and a gateway on another machine has it there."""
    if store is not None:
        if not store.is_file():
            raise SourceError(f"no agent store at {store}")
        agent = agents[0] if len(agents) == 1 else agent_of_path(store) or "main"
        return {agent: store}
    state = state_dir if state_dir is not None else default_state_dir()
    root = state / "agents"
    if agents:
        found = {agent: root / agent / "agent" / STORE_NAME for agent in agents}
        missing = [str(path) for path in found.values() if not path.is_file()]
        if missing:
            raise SourceError(f"no agent store at {', '.join(missing)}{_REMOTE_HINT}")
        return found
    found = {
        path.parent.parent.name: path for path in sorted(root.glob(f"*/agent/{STORE_NAME}"))
    }
    if not found:
        raise SourceError(
            f"no agent store under {root} (agents/<agent>/agent/{STORE_NAME}){_REMOTE_HINT}"
        )
    return found


_REMOTE_HINT = (
    ": the gateway source reads each entry from the agent's store and cannot run without it. "
    "Point --state-dir (or $OPENCLAW_STATE_DIR) or --store at the gateway's state folder; for "
    "a gateway on another machine, --projected publishes its display projection instead, "
    "which is not the transcript (see the README)"
)
