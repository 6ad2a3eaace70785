"""Checkpoint files of the live sources: where each source got to, saved after the broker acked.

A checkpoint is one JSON object naming its source kind and origin (the folder or database it
belongs to), replaced atomically: a crash leaves either the old or the new file, never half of
one, so a restart neither loses nor re-sends records.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: unreadable, malformed, or another source's."""


def load_checkpoint(path: Path, kind: str, origin: str) -> dict[str, Any] | None:
    """The checkpoint's content, or None when there is none yet.

    A checkpoint of another kind or origin is refused rather than reused: positions of one
    folder or database mean nothing in another, and starting over would re-send everything.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise CheckpointError(f"cannot read checkpoint {path}: {error}") from error
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise CheckpointError(f"checkpoint {path} is not JSON: {error}") from error
    if not isinstance(data, dict) or data.get("version") != VERSION or data.get("kind") != kind:
        raise CheckpointError(f"{path} is not a version {VERSION} {kind} checkpoint")
    if data.get("origin") != origin:
        raise CheckpointError(
            f"checkpoint {path} belongs to {data.get('origin')!r}, not {origin!r}; "
            "give another --checkpoint (or edit its origin if the data moved)"
        )
    return data


def save_checkpoint(path: Path, kind: str, origin: str, content: dict[str, Any]) -> None:
    """Write the checkpoint durably: a temporary file, fsynced, renamed over the old one."""
    data = {"version": VERSION, "kind": kind, "origin": origin, **content}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("wb") as handle:
            handle.write(orjson.dumps(data, option=orjson.OPT_INDENT_2))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Makes the rename itself survive a power cut, not only the file's bytes."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
