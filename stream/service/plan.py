"""Which processes `session-stream up` runs for one OpenClaw install, and their command lines.

In order: the broker (unless one is configured), the worker, the source that fits the OpenClaw
found, the memory writer into its workspaces. The source: the gateway source when OpenClaw
keeps its transcripts in SQLite stores (2026.8+) and the gateway's secret is known (it reads
the stores and waits for a gateway that boots late); else `follow-sqlite` over each agent's
store; else `follow` over the JSONL session files (up to 2026.7). An install that has written
no session yet has neither: the source is chosen once one appears.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from stream.brokers.home import LocalBroker
from stream.brokers.local import port_is_open
from stream.kafka.admin import answers_metadata, run_sync
from stream.kafka.configuration import client_options
from stream.openclaw import OpenClaw
from stream.service.layout import StateDir
from stream.service.supervisor import ChildSpec
from stream.settings import Settings

log = logging.getLogger(__name__)

# A stop waits this long for each before SIGKILL: a source ends its batch in hand and writes
# its checkpoint, the worker delivers its batch and leaves its group, Kafka closes its logs.
SOURCE_GRACE, WRITER_GRACE, WORKER_GRACE, BROKER_GRACE = 20.0, 20.0, 45.0, 60.0


def command(*args: str) -> list[str]:
    """A session-stream subcommand run by this very interpreter (this install, this venv)."""
    return [sys.executable, "-m", "stream.cli", *args]


def broker_spec(broker: LocalBroker, settings: Settings, env: dict[str, str],
                state: StateDir) -> ChildSpec:
    args = ["broker", "--state-dir", str(state.root)]
    if not broker.durable:
        args.append("--memory-only")

    def ready() -> bool:
        if not port_is_open(broker.port):
            return False  # a request to a closed port would only log a connection error
        try:
            return run_sync(lambda: answers_metadata(client_options(settings)))
        except Exception:  # noqa: BLE001 - not ready, whatever the client's reason
            return False

    return ChildSpec("broker", command(*args), env, BROKER_GRACE, ready=ready)


def worker_spec(env: dict[str, str]) -> ChildSpec:
    return ChildSpec("worker", command("worker"), env, WORKER_GRACE)


def writer_spec(openclaw: OpenClaw, env: dict[str, str], settings: Settings) -> ChildSpec:
    return ChildSpec("memory-writer", command(
        "memory-writer", "--workspaces", "--openclaw-state", str(openclaw.state_dir),
        "--group", memory_group(settings)), env, WRITER_GRACE)


def memory_group(settings: Settings) -> str:
    return f"{settings.app_id}-memory-writer"


@dataclass(frozen=True)
class SourcePlan:
    kind: str  # gateway, follow-sqlite or follow
    children: list[ChildSpec]
    checkpoints: dict[str, Path]  # per agent (gateway, follow-sqlite) or for all (follow)

    def describe(self, openclaw: OpenClaw) -> str:
        if self.kind == "gateway":
            return f"gateway {openclaw.gateway_url} and the stores of {openclaw.state_dir}"
        if self.kind == "follow-sqlite":
            return f"follow-sqlite over the stores of agents {', '.join(self.checkpoints)}"
        return f"follow over the session files of {openclaw.state_dir / 'agents'}"


def choose_source(openclaw: OpenClaw, state: StateDir, env: dict[str, str]) -> SourcePlan | None:
    """The source that fits what OpenClaw has written; None while it has written nothing."""
    stores = openclaw.stores()
    secret = openclaw.gateway_secret()
    if stores and secret is not None:
        checkpoint = state.checkpoint("gateway")
        name, value = secret
        spec = ChildSpec("source", command(
            "gateway", "--url", openclaw.gateway_url, "--state-dir", str(openclaw.state_dir),
            "--checkpoint", str(checkpoint), "--startup-deadline", "0"),
            {**env, name: value}, SOURCE_GRACE)
        return SourcePlan("gateway", [spec], dict.fromkeys(stores, checkpoint))
    if stores:
        # Each agent's store has its own follower: a store is one database, and an agent
        # that OpenClaw adds later is picked up at the next start.
        checkpoints = {agent: state.checkpoint(f"follow-sqlite-{agent}") for agent in stores}
        specs = [ChildSpec(f"source-{agent}", command(
            "follow-sqlite", str(path), "--checkpoint", str(checkpoints[agent])), env,
            SOURCE_GRACE) for agent, path in stores.items()]
        return SourcePlan("follow-sqlite", specs, checkpoints)
    if openclaw.has_session_files():
        checkpoint = state.checkpoint("follow")
        spec = ChildSpec("source", command(
            "follow", str(openclaw.state_dir / "agents"), "--checkpoint", str(checkpoint)),
            env, SOURCE_GRACE)
        return SourcePlan("follow", [spec], {"*": checkpoint})
    return None
