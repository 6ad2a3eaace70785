"""The loop both sources share, and their checkpoint files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from stream.sources.checkpoint import (
    CheckpointError,
    CheckpointWriter,
    load_checkpoint,
    save_checkpoint,
)
from stream.sources.publish import Batch, Record, pump
from tests.support.sources import ScriptedSource, records


async def test_once_polls_again_while_batches_say_more_then_stops() -> None:
    source = ScriptedSource(
        [Batch(records(b"1", b"2"), 1, more=True), Batch(records(b"3"), 2), Batch(records(b"4"), 3)]
    )
    sent: list[Record] = []

    async def send(batch: list[Record]) -> None:
        sent.extend(batch)

    assert await pump(source, send, poll_interval=60, once=True) == 3

    assert sent == records(b"1", b"2", b"3")
    assert source.committed == [1, 2]


async def test_a_failed_send_commits_nothing() -> None:
    source = ScriptedSource([Batch(records(b"1"), 1)])

    async def send(batch: list[Record]) -> None:
        raise ConnectionError("broker gone")

    with pytest.raises(ConnectionError):
        await pump(source, send, poll_interval=60, once=True)

    assert source.committed == []


async def test_empty_batches_are_committed_without_sending() -> None:
    source = ScriptedSource([Batch([], 5)])

    async def send(batch: list[Record]) -> None:
        raise AssertionError("nothing to send")

    assert await pump(source, send, poll_interval=60, once=True) == 0
    assert source.committed == [5]


async def test_without_once_it_polls_every_interval_until_stopped() -> None:
    source = ScriptedSource([Batch(records(b"1"), 1)])
    stop = asyncio.Event()

    async def send(batch: list[Record]) -> None:
        pass

    running = asyncio.create_task(pump(source, send, poll_interval=0.01, once=False, stop=stop))
    await asyncio.sleep(0.2)
    stop.set()

    assert await asyncio.wait_for(running, 5) == 1
    assert source.polls > 3


def test_checkpoint_round_trips_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "cp.json"

    save_checkpoint(path, "follow", "/data", {"files": [1]})
    save_checkpoint(path, "follow", "/data", {"files": [2]})

    assert load_checkpoint(path, "follow", "/data") == {
        "version": 1,
        "kind": "follow",
        "origin": "/data",
        "files": [2],
    }
    assert [p.name for p in path.parent.iterdir()] == ["cp.json"]


def test_no_checkpoint_yet_is_none(tmp_path: Path) -> None:
    assert load_checkpoint(tmp_path / "none.json", "follow", "/data") is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "is not JSON"),
        (orjson.dumps({"version": 1, "kind": "follow-sqlite", "origin": "/data"}), "not a version"),
        (orjson.dumps({"version": 1, "kind": "follow", "origin": "/elsewhere"}), "belongs to"),
    ],
)
def test_unusable_checkpoints_are_refused(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "cp.json"
    path.write_bytes(content)

    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path, "follow", "/data")


def test_the_checkpoint_writer_saves_the_latest_content_and_flushes_on_close(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.json"
    writer = CheckpointWriter(path, "test", "origin")
    for n in range(50):
        writer.save({"n": n})
    writer.close()

    assert load_checkpoint(path, "test", "origin")["n"] == 49


def test_a_failed_background_save_is_raised_by_the_next_call(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    writer = CheckpointWriter(tmp_path / "file" / "c.json", "test", "origin")  # parent: a file
    writer.save({"n": 1})
    with pytest.raises(OSError):
        writer.close()
