"""The sources' positions files (what `--checkpoint` names)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson
import pytest

from stream.formats import FormatTooNew
from stream.sources.positions import (
    PositionsError,
    PositionsWriter,
    load_positions,
    save_positions,
)


def test_checkpoint_round_trips_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "cp.json"

    save_positions(path, "follow", "/data", {"files": [1]})
    save_positions(path, "follow", "/data", {"files": [2]})

    assert load_positions(path, "follow", "/data") == {
        "version": 1,
        "kind": "follow",
        "origin": "/data",
        "files": [2],
    }
    assert [p.name for p in path.parent.iterdir()] == ["cp.json"]


def test_no_checkpoint_yet_is_none_and_said_in_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_positions(Path("none.json"), "follow", "/data") is None
    (line,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    # where it was looked for, whatever folder the source was started from
    assert line.getMessage().startswith(f"no checkpoint at {tmp_path}{os.sep}none.json: follow "
                                        "starts from the beginning of /data")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "is not JSON"),
        (orjson.dumps({"version": 1, "kind": "follow-sqlite", "origin": "/data"}),
         "not a format 1"),
        (orjson.dumps({"version": 1, "kind": "follow", "origin": "/elsewhere"}), "belongs to"),
    ],
)
def test_unusable_checkpoints_are_refused(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "cp.json"
    path.write_bytes(content)

    with pytest.raises(PositionsError, match=message):
        load_positions(path, "follow", "/data")


def test_the_checkpoint_writer_saves_the_latest_content_and_flushes_on_close(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.json"
    writer = PositionsWriter(path, "test", "origin")
    for n in range(50):
        writer.save({"n": n})
    writer.close()

    assert load_positions(path, "test", "origin")["n"] == 49


def test_a_failed_background_save_is_raised_by_the_next_call(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    writer = PositionsWriter(tmp_path / "file" / "c.json", "test", "origin")  # parent: a file
    writer.save({"n": 1})
    with pytest.raises(OSError):
        writer.close()


def test_a_checkpoint_without_its_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cp.json"
    path.write_bytes(orjson.dumps({"kind": "follow", "origin": "/data"}))

    with pytest.raises(PositionsError, match="not a format 1 follow checkpoint"):
        load_positions(path, "follow", "/data")


def test_a_checkpoint_of_a_newer_format_names_both_formats(tmp_path: Path) -> None:
    path = tmp_path / "cp.json"
    path.write_bytes(orjson.dumps({"version": 2, "kind": "follow", "origin": "/data"}))

    with pytest.raises(FormatTooNew) as refused:
        load_positions(path, "follow", "/data")

    assert str(refused.value).startswith(
        f"checkpoint {path} holds positions format 2, newer than session-stream ")
    assert "(positions format 1)" in str(refused.value)
