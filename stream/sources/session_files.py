"""OpenClaw session files on disk: which files are sessions, their ids, their lines."""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import orjson

# Compaction checkpoints and locks sit beside the sessions but are not transcripts.
_SKIPPED = re.compile(r"\.checkpoint\.|\.lock$|^sessions\.json$")


# A gzip file can fail part-way through; these are the ways reading a session file fails.
READ_ERRORS = (OSError, EOFError, zlib.error)


def read_error_reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def is_session_file(path: Path) -> bool:
    return ".jsonl" in path.name and not _SKIPPED.search(path.name)


def find_session_files(root: Path) -> list[Path]:
    """A file is taken as given; a directory is searched recursively, in a stable order."""
    if not root.is_dir():
        return [root]
    return sorted(p for p in root.rglob("*") if p.is_file() and is_session_file(p))


def open_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line without its terminator) of every non-blank line."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            body = line.rstrip(b"\r\n")
            if body.strip():
                yield number, body


def session_id_from_name(path: Path) -> str:
    return path.name.split(".jsonl", 1)[0]


def session_id_of(path: Path, first_line: bytes | None) -> str:
    """The header's id when the file starts with one, else the file name up to `.jsonl`."""
    if first_line is not None:
        try:
            header = orjson.loads(first_line)
        except orjson.JSONDecodeError:
            header = None
        if isinstance(header, dict) and header.get("type") == "session":
            header_id = header.get("id")
            if isinstance(header_id, str) and header_id:
                return header_id
    return session_id_from_name(path)
