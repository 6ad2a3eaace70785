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
# OpenClaw (2026.5 at least) writes a runtime trace beside each transcript, <id>.trajectory.jsonl,
# whose lines are trace records ({"traceSchema":"openclaw-trajectory",...}), not entries. Its
# pointer <id>.trajectory-path.json and the Telegram channel's sessions.json.telegram-*.json are
# not .jsonl files and are never taken. A session id may itself end in ".trajectory", so that
# name alone does not decide: the file is a trace when its first line is a trace record.
_TRACE_NAME = re.compile(r"\.trajectory\.jsonl(?:\.|$)")
TRACE_SCHEMA = "openclaw-trajectory"


# A gzip file can fail part-way through; these are the ways reading a session file fails.
READ_ERRORS = (OSError, EOFError, zlib.error)


def read_error_reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def is_session_file(path: Path) -> bool:
    """Whether the name is a transcript's (a trace named like one is told by `is_trace`)."""
    return ".jsonl" in path.name and not _SKIPPED.search(path.name)


def may_be_trace(path: Path) -> bool:
    """The name is a runtime trace's, `<id>.trajectory.jsonl` (or an archive or .gz of it)."""
    return bool(_TRACE_NAME.search(path.name))


def is_trace_line(line: bytes) -> bool:
    """A line of an OpenClaw runtime trace: an object whose traceSchema is openclaw-trajectory
    (or a variant of it, `openclaw-trajectory-...`)."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    schema = value.get("traceSchema") if isinstance(value, dict) else None
    return isinstance(schema, str) and schema.startswith(TRACE_SCHEMA)


def first_line(path: Path, *, complete: bool = False) -> bytes | None:
    """The first non-blank line without its terminator (a .gz file read compressed); None when
    there is none, or, with `complete`, while it has no newline yet."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        for line in handle:
            if line.strip():
                if complete and not line.endswith(b"\n"):
                    return None
                return line.rstrip(b"\r\n")
    return None


def is_trace(path: Path) -> bool:
    """A runtime trace named like a transcript: the name may be a trace's and the first line is a
    trace record. An unreadable file is not called a trace (reading it reports the error)."""
    if not may_be_trace(path):
        return False
    try:
        line = first_line(path)
    except READ_ERRORS:
        return False
    return line is not None and is_trace_line(line)


def find_session_files(root: Path) -> list[Path]:
    """A file is taken as given; a directory is searched recursively, in a stable order, for
    transcripts (`is_session_file`, runtime traces left out)."""
    if not root.is_dir():
        return [root]
    return sorted(
        p for p in root.rglob("*") if p.is_file() and is_session_file(p) and not is_trace(p)
    )


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
