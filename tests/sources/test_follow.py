"""`follow` reads what is new in live session files; a fake sender stands in for the broker."""

from __future__ import annotations

import argparse
import io
import logging
import os
import shutil
from pathlib import Path

import orjson
import pytest

from stream.brokers import free_port
from stream.commands import follow as follow_command
from stream.sources import follow
from stream.sources.base import Batch
from stream.sources.follow import FileFollower, Position
from stream.sources.positions import PositionsError
from stream.sources.session_files import open_lines
from tests.support.data import FIXTURES
from tests.support.session_files import POINTER, TELEGRAM_MESSAGES, TRACE_LINE
from tests.support.sources import append, by_key, entry, header, lines, without_headers
from tests.support.sources import drain as drain_with_headers


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "state" / "agents" / "main" / "sessions").mkdir(parents=True)
    return tmp_path / "state"


@pytest.fixture
def sessions(root: Path) -> Path:
    return root / "agents" / "main" / "sessions"


def drain(source: FileFollower) -> list[tuple[bytes, bytes]]:
    return without_headers(drain_with_headers(source))


def follower(root: Path) -> FileFollower:
    """A follower as a fresh process would make it, from the checkpoint on disk."""
    return FileFollower(root, root.parent / "follow.checkpoint.json")




# --- new files, appended lines, partial lines ------------------------------------------------


def test_a_new_file_is_sent_line_for_line_keyed_by_its_header_id(
    root: Path, sessions: Path
) -> None:
    first, second = header("s-1"), entry("e-1", "grüße")
    (sessions / "file-name.jsonl").write_bytes(first + b"\n  \n" + second + b'{"id":"e-2"}\r\n')

    assert drain(follower(root)) == [
        (b"s-1", first.rstrip(b"\n")),
        (b"s-1", second.rstrip(b"\n")),
        (b"s-1", b'{"id":"e-2"}'),
    ]


def test_a_record_names_the_agent_whose_sessions_folder_holds_it(root: Path,
                                                                  sessions: Path) -> None:
    (sessions / "s-1.jsonl").write_bytes(header("s-1"))
    elsewhere = root / "exported"
    elsewhere.mkdir()
    (elsewhere / "s-2.jsonl").write_bytes(header("s-2"))

    sent = {record[0]: record[2:] for record in drain_with_headers(follower(root))}
    assert sent == {b"s-1": (((("openclaw-agent-id", b"main"),)),), b"s-2": ()}


def test_without_a_header_the_key_is_the_file_name_up_to_jsonl(root: Path) -> None:
    deep = root / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "s-9.jsonl").write_bytes(entry("e-1"))

    assert drain(follower(root)) == [(b"s-9", lines(entry("e-1"))[0])]


def test_only_appended_lines_are_sent(root: Path, sessions: Path) -> None:
    live = sessions / "s-1.jsonl"
    live.write_bytes(header("s-1") + entry("e-1"))
    source = follower(root)
    drain(source)

    append(live, entry("e-2"), entry("e-3"))

    assert by_key(drain(source)) == {b"s-1": lines(entry("e-2"), entry("e-3"))}
    assert drain(source) == []


def test_a_partial_last_line_is_sent_only_once_its_newline_arrives(
    root: Path, sessions: Path
) -> None:
    live = sessions / "s-1.jsonl"
    complete = entry("e-2")
    live.write_bytes(header("s-1") + complete[:10])
    source = follower(root)

    assert drain(source) == [(b"s-1", lines(header("s-1"))[0])]
    append(live, complete[10:-1])
    assert drain(source) == []
    append(live, b"\n")
    assert drain(source) == [(b"s-1", lines(complete)[0])]


def test_a_first_line_still_partial_waits_and_then_gives_the_key(
    root: Path, sessions: Path
) -> None:
    live = sessions / "name.jsonl"
    live.write_bytes(header("s-7")[:5])
    source = follower(root)

    assert drain(source) == []
    append(live, header("s-7")[5:])
    assert drain(source) == [(b"s-7", lines(header("s-7"))[0])]


# --- archived generations --------------------------------------------------------------------


def test_a_reset_rename_is_not_sent_again(root: Path, sessions: Path) -> None:
    live = sessions / "s-1.jsonl"
    live.write_bytes(header("s-1") + entry("e-1"))
    source = follower(root)
    drain(source)

    live.rename(sessions / "s-1.jsonl.reset.2026-04-05T04-22-28.629Z")
    (sessions / "s-2.jsonl").write_bytes(header("s-2"))

    assert drain(source) == [(b"s-2", lines(header("s-2"))[0])]
    assert drain(follower(root)) == []


def test_lines_written_just_before_the_rename_are_sent_once(root: Path, sessions: Path) -> None:
    live = sessions / "s-1.jsonl"
    live.write_bytes(header("s-1"))
    source = follower(root)
    drain(source)

    append(live, entry("e-1"))
    live.rename(sessions / "s-1.jsonl.deleted.2026-04-05T04-22-28.629Z")

    assert drain(source) == [(b"s-1", lines(entry("e-1"))[0])]
    assert drain(source) == []


def test_a_rename_while_stopped_is_recognised_from_the_checkpoint(
    root: Path, sessions: Path
) -> None:
    live = sessions / "s-1.jsonl"
    live.write_bytes(header("s-1") + entry("e-1"))
    drain(follower(root))

    live.rename(sessions / "s-1.jsonl.deleted.2026-04-05T04-22-28.629Z")

    assert drain(follower(root)) == []


def test_a_copy_of_a_vanished_file_takes_over_its_position(root: Path, sessions: Path) -> None:
    live = sessions / "s-1.jsonl"
    live.write_bytes(header("s-1") + entry("e-1"))
    source = follower(root)
    drain(source)

    # An archive made by copying (another file system, a restore) has another inode.
    archive = sessions / "s-1.jsonl.reset.2026-04-05T04-22-28.629Z"
    shutil.copyfile(live, archive)
    live.unlink()
    append(archive, entry("e-2"))

    assert drain(source) == [(b"s-1", lines(entry("e-2"))[0])]


def test_a_copy_that_differs_before_the_position_is_a_new_file(root: Path, sessions: Path) -> None:
    live = sessions / "s-1.jsonl"
    live.write_bytes(header("s-1") + entry("e-1"))
    source = follower(root)
    drain(source)

    (sessions / "s-1.jsonl.reset.2026-04-05T04-22-28.629Z").write_bytes(
        header("s-1") + entry("e-X")
    )
    live.unlink()

    assert by_key(drain(source)) == {b"s-1": lines(header("s-1"), entry("e-X"))}


def test_an_archive_never_seen_is_sent_once(root: Path, sessions: Path) -> None:
    archive = sessions / "s-1.jsonl.reset.2026-04-05T04-22-28.629Z"
    archive.write_bytes(header("s-1") + entry("e-1"))

    assert by_key(drain(follower(root))) == {b"s-1": lines(header("s-1"), entry("e-1"))}
    assert drain(follower(root)) == []


def test_a_vanished_file_is_forgotten_after_a_few_passes(root: Path, sessions: Path) -> None:
    live = sessions / "s-1.jsonl"
    live.write_bytes(header("s-1"))
    source = follower(root)
    drain(source)
    live.unlink()

    for _ in range(follow.MISSING_PASSES_KEPT + 1):
        drain(source)

    assert source.positions == {}
    assert orjson.loads((root.parent / "follow.checkpoint.json").read_bytes())["files"] == []


# --- files that are not transcripts ----------------------------------------------------------


def test_the_real_layout_sends_every_transcript_and_ignores_the_rest(sessions: Path) -> None:
    for fixture in FIXTURES.iterdir():
        shutil.copy(fixture, sessions / fixture.name)
    (sessions / "s-1.jsonl.lock").write_bytes(entry("lock"))
    (sessions / "zipped.jsonl.gz").write_bytes(b"\x1f\x8b")

    sent = by_key(drain(follower(sessions.parent.parent.parent)))

    followed = sorted(
        p for p in sessions.iterdir() if p.name.endswith(".jsonl") or ".jsonl.reset." in p.name
    )
    followed = [p for p in followed if ".checkpoint." not in p.name]
    assert len(followed) == 7
    expected = {p.name.split(".jsonl")[0].encode(): [b for _, b in open_lines(p)] for p in followed}
    assert sent == expected


def test_runtime_traces_are_left_out_and_a_transcript_named_like_one_is_followed(
    root: Path, sessions: Path
) -> None:
    (sessions / "s-1.jsonl").write_bytes(header("s-1") + entry("a-1"))
    trace = sessions / "s-1.trajectory.jsonl"
    trace.write_bytes(TRACE_LINE + b"\n")
    (sessions / "s-1.trajectory-path.json").write_bytes(POINTER)
    (sessions / "sessions.json.telegram-messages.json").write_bytes(TELEGRAM_MESSAGES)
    # Both still being written: their first lines not complete, so neither is decided yet.
    starting_trace = sessions / "s-2.trajectory.jsonl"
    starting_trace.write_bytes(TRACE_LINE[:30])
    named_like_a_trace = sessions / "plan.trajectory.jsonl"
    named_like_a_trace.write_bytes(header("plan.trajectory")[:12])
    source = follower(root)

    assert by_key(drain(source)) == {b"s-1": lines(header("s-1"), entry("a-1"))}
    append(trace, TRACE_LINE + b"\n")
    append(starting_trace, TRACE_LINE[30:] + b"\n", TRACE_LINE + b"\n")
    append(named_like_a_trace, header("plan.trajectory")[12:], entry("p-1"))
    assert by_key(drain(source)) == {
        b"plan.trajectory": lines(header("plan.trajectory"), entry("p-1"))
    }
    assert drain(follower(root)) == []  # a restart from the checkpoint sends nothing again


def test_a_trace_followed_before_traces_were_recognised_is_followed_no_more(
    root: Path, sessions: Path
) -> None:
    trace = sessions / "s-1.trajectory.jsonl"
    trace.write_bytes(TRACE_LINE + b"\n")
    info = trace.stat()
    # The checkpoint an older session-stream left: the trace read to its end.
    old = follower(root)
    position = Position(str(trace.relative_to(root)), info.st_dev, info.st_ino, info.st_size,
                        "not checked", "s-1")
    old.commit(Batch([], {position.identity: position}))
    append(trace, TRACE_LINE + b"\n")

    assert drain(follower(root)) == []


# --- restarts and rewrites -------------------------------------------------------------------


def test_a_restart_from_the_checkpoint_neither_loses_nor_resends(
    root: Path, sessions: Path
) -> None:
    live = sessions / "s-1.jsonl"
    live.write_bytes(header("s-1") + entry("e-1"))
    drain(follower(root))

    append(live, entry("e-2"), entry("e-3")[:7])
    assert drain(follower(root)) == [(b"s-1", lines(entry("e-2"))[0])]

    append(live, entry("e-3")[7:])
    assert drain(follower(root)) == [(b"s-1", lines(entry("e-3"))[0])]


def test_lines_polled_but_never_committed_are_read_again(root: Path, sessions: Path) -> None:
    (sessions / "s-1.jsonl").write_bytes(header("s-1") + entry("e-1"))
    crashed = follower(root)
    crashed.poll()  # the send failed: no commit

    assert by_key(drain(follower(root))) == {b"s-1": lines(header("s-1"), entry("e-1"))}


def test_a_truncated_file_is_sent_again_from_its_start(
    root: Path, sessions: Path, caplog: pytest.LogCaptureFixture
) -> None:
    live = sessions / "s-1.jsonl"
    live.write_bytes(header("s-1") + entry("e-1") + entry("e-2"))
    source = follower(root)
    drain(source)

    live.write_bytes(header("s-1"))

    with caplog.at_level(logging.WARNING):
        assert drain(source) == [(b"s-1", lines(header("s-1"))[0])]
    assert "truncated or rewritten" in caplog.text


def test_a_file_rewritten_in_place_is_sent_again_from_its_start(root: Path, sessions: Path) -> None:
    live = sessions / "s-1.jsonl"
    live.write_bytes(header("s-1") + entry("e-1"))
    source = follower(root)
    drain(source)
    inode = live.stat().st_ino

    live.write_bytes(header("s-1") + entry("e-X") + entry("e-2"))

    assert live.stat().st_ino == inode
    assert by_key(drain(source)) == {b"s-1": lines(header("s-1"), entry("e-X"), entry("e-2"))}


def test_a_checkpoint_of_another_folder_is_refused(
    root: Path, sessions: Path, tmp_path: Path
) -> None:
    (sessions / "s-1.jsonl").write_bytes(header("s-1"))
    drain(follower(root))
    other = tmp_path / "other"
    other.mkdir()

    with pytest.raises(PositionsError, match="belongs to"):
        FileFollower(other, root.parent / "follow.checkpoint.json")


# --- order and batching ----------------------------------------------------------------------


def test_two_sessions_interleaved_keep_their_own_order(root: Path, sessions: Path) -> None:
    one, two = sessions / "s-1.jsonl", sessions / "s-2.jsonl"
    one.write_bytes(header("s-1"))
    two.write_bytes(header("s-2"))
    source = follower(root)
    sent = drain(source)
    for n in range(6):
        append(one, entry(f"one-{n}"))
        append(two, entry(f"two-{n}"))
        if n % 2:
            sent += drain(source)

    assert by_key(sent) == {
        b"s-1": lines(header("s-1"), *(entry(f"one-{n}") for n in range(6))),
        b"s-2": lines(header("s-2"), *(entry(f"two-{n}") for n in range(6))),
    }


def test_a_backlog_larger_than_the_read_budget_comes_in_several_batches(
    root: Path, sessions: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follow, "READ_BUDGET", 200)
    long_line = entry("long", "x" * 1000)
    chunks = [header("s-1"), *(entry(f"e-{n}") for n in range(20)), long_line, entry("last")]
    (sessions / "s-1.jsonl").write_bytes(b"".join(chunks))
    (sessions / "s-2.jsonl").write_bytes(header("s-2"))
    source = follower(root)

    first = source.poll()
    assert first.more
    assert 0 < len(first.records) < len(chunks)
    source.commit(first)
    sent = first.records + drain(source)

    assert by_key(sent) == {b"s-1": lines(*chunks), b"s-2": lines(header("s-2"))}


# --- the command -----------------------------------------------------------------------------


def test_main_reports_a_missing_folder(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    follow_command.add_arguments(parser)
    args = parser.parse_args([str(tmp_path / "missing"), "--checkpoint", str(tmp_path / "cp")])
    stderr = io.StringIO()

    assert follow_command.main(args, stderr=stderr) == 1

    assert "is not a directory" in stderr.getvalue()
    assert not os.path.exists(tmp_path / "cp")


def test_main_reports_an_unreachable_broker(root: Path, sessions: Path) -> None:
    (sessions / "s-1.jsonl").write_bytes(header("s-1"))
    parser = argparse.ArgumentParser()
    follow_command.add_arguments(parser)
    checkpoint = root.parent / "cp.json"
    args = parser.parse_args(
        [
            str(root),
            "--once",
            "--checkpoint",
            str(checkpoint),
            "--broker",
            f"kafka://127.0.0.1:{free_port()}",
        ]
    )
    stderr = io.StringIO()

    assert follow_command.main(args, stderr=stderr) == 1

    assert "cannot publish to the Kafka broker at 127.0.0.1:" in stderr.getvalue()
    assert not checkpoint.exists()
