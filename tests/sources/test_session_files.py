"""Which files under a sessions folder are transcripts: by name, and for a name a runtime trace
shares with a possible transcript, by the first line."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from stream.sources.session_files import (
    find_session_files,
    first_line,
    is_session_file,
    is_trace,
    is_trace_line,
    may_be_trace,
)
from tests.support.session_files import POINTER, TELEGRAM_MESSAGES, TRACE_LINE


def header(session_id: str) -> bytes:
    return orjson.dumps({"type": "session", "version": 3, "id": session_id, "cwd": "/w"})


def entry(entry_id: str) -> bytes:
    return orjson.dumps({"type": "message", "id": entry_id, "parentId": None,
                         "message": {"role": "user", "content": "hello"}})


def write(path: Path, *lines: bytes, newline: bool = True) -> Path:
    data = b"\n".join(lines) + (b"\n" if newline else b"")
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


@pytest.mark.parametrize(
    ("name", "session", "maybe_trace"),
    [
        ("sx-1.jsonl", True, False),
        ("sx-1.trajectory.jsonl", True, True),
        ("sx-1.trajectory.jsonl.gz", True, True),
        ("sx-1.trajectory.jsonl.reset.2026-04-05T04-22-28.629Z", True, True),
        ("sx-1.trajectory-path.json", False, False),
        ("sessions.json", False, False),
        ("sessions.json.telegram-messages.json", False, False),
        ("sessions.json.telegram-sent-messages.json", False, False),
        # Near misses: "trajectory" elsewhere in a transcript's name.
        ("trajectory.jsonl", True, False),
        ("mars-trajectory.jsonl", True, False),
        ("trajectory-review.jsonl", True, False),
        ("sx-1.trajectory2.jsonl", True, False),
        ("sx-1.trajectory.json", False, False),
    ],
)
def test_names(name: str, session: bool, maybe_trace: bool) -> None:
    assert is_session_file(Path(name)) is session
    assert may_be_trace(Path(name)) is maybe_trace


@pytest.mark.parametrize(
    ("line", "trace"),
    [
        (TRACE_LINE, True),
        (POINTER, True),
        (header("sx-1.trajectory"), False),
        (entry("e-1"), False),
        (b'{"traceSchema":"another-trace","type":"session.started"}', False),
        (b'{"traceSchema":5}', False),
        (b'["openclaw-trajectory"]', False),
        (b'"openclaw-trajectory"', False),
        (b'{"traceSchema":"openclaw-trajectory"', False),  # not JSON (cut short)
        (b"\xff\xfe", False),
    ],
)
def test_first_lines(line: bytes, trace: bool) -> None:
    assert is_trace_line(line) is trace


def test_first_line_skips_blank_lines_and_waits_for_a_newline_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "a.trajectory.jsonl"
    path.write_bytes(b"\n  \n" + TRACE_LINE)
    assert first_line(path) == TRACE_LINE
    assert first_line(path, complete=True) is None
    path.write_bytes(b"\n  \n" + TRACE_LINE + b"\r\n")
    assert first_line(path, complete=True) == TRACE_LINE
    path.write_bytes(b"\n\n")
    assert first_line(path) is None


def test_a_folder_like_openclaw_2026_5_keeps_the_transcripts_only(tmp_path: Path) -> None:
    sessions = tmp_path / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    transcripts = [
        write(sessions / "sx-1.jsonl", header("sx-1"), entry("a")),
        write(sessions / "893fd303.jsonl", header("893fd303"), entry("b")),
        # A session whose id ends in ".trajectory": its transcript starts with its header...
        write(sessions / "plan.trajectory.jsonl", header("plan.trajectory"), entry("c")),
        # ... and an excerpt of one without a header is still a transcript.
        write(sessions / "cut.trajectory.jsonl", entry("d")),
        write(sessions / "mars-trajectory.jsonl", header("mars-trajectory"), entry("e")),
    ]
    for trace in ("sx-1", "893fd303", "plan.trajectory"):
        write(sessions / f"{trace}.trajectory.jsonl", TRACE_LINE, TRACE_LINE)
        write(sessions / f"{trace}.trajectory-path.json", POINTER, newline=False)
    write(sessions / "old.trajectory.jsonl.gz", TRACE_LINE)
    write(sessions / "blank-first.trajectory.jsonl", b"", TRACE_LINE)
    write(sessions / "sessions.json", b"{}")
    write(sessions / "sessions.json.telegram-messages.json", TELEGRAM_MESSAGES)
    write(sessions / "sessions.json.telegram-sent-messages.json", b'{"777":{"9003":1}}')

    assert find_session_files(tmp_path) == sorted(transcripts)
    assert is_trace(sessions / "plan.trajectory.trajectory.jsonl")
    assert not is_trace(sessions / "plan.trajectory.jsonl")
    assert not is_trace(sessions / "missing.trajectory.jsonl")  # unreadable: not called a trace


def test_a_file_given_by_name_is_taken_as_given(tmp_path: Path) -> None:
    trace = write(tmp_path / "sx-1.trajectory.jsonl", TRACE_LINE)
    assert find_session_files(trace) == [trace]
