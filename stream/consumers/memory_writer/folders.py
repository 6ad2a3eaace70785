"""Which folder a session's file goes to: one folder for every agent, a folder per agent below
it, or each agent's own OpenClaw workspace (its `memory/session-stream`), where that agent's
memory search indexes it and no other agent's does.

A session's agent is what its records' headers say (`openclaw-agent-id`, else the agent of
its `openclaw-session-key`), as the sources write them; a session they say nothing of (`produce`)
belongs to OpenClaw's default agent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from stream.consumers.memory_writer.index_format import FORMAT_FILE, INDEX_FORMAT
from stream.consumers.memory_writer.names import file_name
from stream.consumers.memory_writer.render import AGENT_HEADER, KEY_HEADER
from stream.durable import fsync_folder
from stream.formats import FormatTooNew
from stream.openclaw import DEFAULT_AGENT, OpenClaw

INDEX_DIR = ".index"
# Where in an agent's workspace `--workspaces` writes: inside `memory/`, which OpenClaw's memory
# search indexes by default, in a folder of its own beside what OpenClaw writes there.
WORKSPACE_FOLDER = Path("memory") / "session-stream"


class MemoryFolderError(ValueError):
    """The folder named for the memory files cannot hold them; the message is one line."""


class Folders(Protocol):
    def folder_for(self, headers: Mapping[str, str]) -> Path:
        """The checked folder of the session whose record carries `headers`."""
        ...

    def describe(self) -> str:
        """Where the files go, for a person."""
        ...


def agent_of(headers: Mapping[str, str]) -> str:
    agent = headers.get(AGENT_HEADER)
    if agent:
        return agent
    key = headers.get(KEY_HEADER) or ""
    parts = key.split(":")
    return parts[1] if len(parts) > 2 and parts[0] == "agent" and parts[1] else DEFAULT_AGENT


class OneFolder:
    def __init__(self, out: Path) -> None:
        self.out = open_folder(out)

    def folder_for(self, headers: Mapping[str, str]) -> Path:
        return self.out

    def describe(self) -> str:
        return str(self.out)


class FolderPerAgent:
    """OUT/<agent id>/, each made at its agent's first session."""

    def __init__(self, out: Path) -> None:
        self.out = open_folder(out)
        self._opened: dict[str, Path] = {}

    def folder_for(self, headers: Mapping[str, str]) -> Path:
        agent = agent_of(headers)
        folder = self._opened.get(agent)
        if folder is None:
            folder = self._opened[agent] = open_folder(self.out / file_name(agent))
        return folder

    def describe(self) -> str:
        return f"{self.out}/<agent>"


class AgentWorkspaces:
    """<the agent's workspace>/memory/session-stream, as OpenClaw resolves the workspace."""

    def __init__(self, openclaw: OpenClaw) -> None:
        self.openclaw = openclaw
        self._opened: dict[str, Path] = {}

    def folder_for(self, headers: Mapping[str, str]) -> Path:
        agent = agent_of(headers)
        folder = self._opened.get(agent)
        if folder is None:
            # OpenClaw's config names these folders, not a person typing: all of it is made.
            folder = self.openclaw.workspace(agent) / WORKSPACE_FOLDER
            folder.mkdir(parents=True, exist_ok=True)
            self._opened[agent] = folder = open_folder(folder)
        return folder

    def describe(self) -> str:
        return f"{self.openclaw.workspace(self.openclaw.default_agent) / WORKSPACE_FOLDER} " \
               "(each agent's own workspace)"


def open_folder(out: Path) -> Path:
    """Check that `out` can hold the memory files, creating it if missing, and its parent too.

    Up to two levels are made: an OpenClaw workspace's `memory/` folder and ours in it (the
    workspace has no `memory/` until something writes there; with the session-memory hook off,
    nothing does). A workspace that is missing is most often a mistyped one, and memory written
    where OpenClaw never looks would be lost to it silently: refused.
    """
    out = Path(out)
    if not out.exists():
        if not out.parent.is_dir() and not out.parent.parent.is_dir():
            raise MemoryFolderError(f"{out}: neither {out.parent} nor {out.parent.parent} "
                                    "exists (name a folder in an OpenClaw workspace's memory "
                                    "folder, or a folder in memory.search.extraPaths)")
        try:
            out.mkdir(parents=True)
        except OSError as error:
            raise MemoryFolderError(f"{out}: cannot be created: {error.strerror}") from error
    if not out.is_dir():
        raise MemoryFolderError(f"{out}: is not a folder")
    try:
        (out / INDEX_DIR).mkdir(exist_ok=True)
        probe = out / INDEX_DIR / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise MemoryFolderError(f"{out}: is not writable: {error.strerror}") from error
    _name_index_format(out / INDEX_DIR / FORMAT_FILE)
    return out


def _name_index_format(path: Path) -> None:
    """FormatTooNew for an index a later version wrote; else the folder names its format, so
    that version can tell this one's index from its own."""
    try:
        text = path.read_text("ascii").strip()
    except FileNotFoundError:
        with path.open("ab") as handle:
            handle.write(f"{INDEX_FORMAT}\n".encode("ascii"))
            handle.flush()
            os.fsync(handle.fileno())
        fsync_folder(path.parent)
        return
    except (OSError, UnicodeDecodeError) as error:
        raise MemoryFolderError(f"{path}: cannot be read: {error}") from error
    if not text.isdigit():
        raise MemoryFolderError(f"{path}: names no memory index format ({text[:40]!r})")
    if int(text) > INDEX_FORMAT:
        raise FormatTooNew("memory index", str(path.parent), int(text), INDEX_FORMAT)
