"""The consumer: raw and clean topics written to memory folders, once, whatever is redelivered."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream.brokers import RunningBroker
from stream.commands.clean import clean_session
from stream.consumers.consume import RunStats, consume
from stream.consumers.memory_writer.compare import duplicate_line_report
from stream.consumers.memory_writer.files import MemoryWriter
from stream.consumers.memory_writer.sink import MemorySink
from stream.engine import Engine
from stream.kafka.admin import create_topics
from stream.kafka.producer import make_producer, send_records
from stream.settings import Settings
from stream.sources.session_files import find_session_files, open_lines, session_id_of
from tests.support.data import FIXTURES
from tests.support.memory import assistant, custom, markdown, raw, user


def duplicate_shapes() -> dict[str, list[dict]]:
    """Sessions whose raw transcripts repeat lines the engine drops, and no line said twice."""
    cli: list[dict] = []
    for turn in range(5):
        reply = f"Answer {turn}: the deployment finished."
        cli += [
            user(f"question {turn}"),
            assistant(reply, thinking="let me think"),
            custom(),
            assistant(reply, api="cli", provider="claude-cli"),  # its cli copy
        ]
    children: list[dict] = []
    for turn in range(3):
        reply = assistant(f"Reply {turn}.", thinking="hmm")
        # the cleaned copy carries the raw reply's usage: one model turn, written twice
        children += [user(f"q{turn}"), reply, assistant(f"Reply {turn}.", parent=reply["id"],
                                                        usage=reply["message"]["usage"])]
    echo = [user("go"), assistant("Done: 3 files changed.", thinking="plan")]
    echo.append(assistant("Done: 3 files changed.", usage=None))  # a subagent echo
    return {"shape-cli-copies": cli, "shape-cleaned-children": children, "shape-echo": echo}


def session_records(tmp_path: Path) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """(raw records, cleaned records) of the fixture sessions and the duplicate shapes."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    for session_id, entries in duplicate_shapes().items():
        header = {"type": "session", "version": 3, "id": session_id}
        lines = [raw(header), *(raw(e) for e in entries)]
        (folder / f"{session_id}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    raw_records, clean_records = [], []
    for path in [*find_session_files(FIXTURES), *find_session_files(folder)]:
        lines = list(open_lines(path))
        session_id = session_id_of(path, lines[0][1] if lines else None)
        key = session_id.encode()
        raw_records += [(key, line) for _, line in lines]
        verdicts = clean_session(Engine(), session_id, str(path), lines)
        clean_records += [(key, v.output) for v in verdicts if v.output is not None]
    return raw_records, clean_records


async def publish(settings: Settings, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = make_producer(settings)
    try:
        await producer.start()
        await send_records(producer, topic, records)
    finally:
        await producer.stop()


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


@pytest.mark.integration
async def test_raw_topic_leaves_duplicate_lines_and_the_clean_topic_none(
    broker: RunningBroker, tmp_path: Path
) -> None:
    # A writer that stops in its group's first generation does not leave the group (aiokafka
    # leaves from generation 1, Tansu starts at 0), so the next member of that group on Tansu
    # waits for its session to time out: the shortest Kafka allows.
    settings = Settings.load(None, {"SESSION_STREAM_BROKER": broker.url}).replace(
        input_topic="mw-raw", clean_topic="mw-clean", session_timeout=6.0
    )
    create_topics(broker.bootstrap, {"mw-raw": 4, "mw-clean": 4})
    raw_records, clean_records = session_records(tmp_path)
    await publish(settings, "mw-raw", raw_records)
    await publish(settings, "mw-clean", clean_records)
    raw_dir, clean_dir = tmp_path / "raw", tmp_path / "clean"

    async def run(topic: str, out: Path, group: str) -> RunStats:
        writer = MemoryWriter(out)
        return await consume(settings, topic, MemorySink(writer), group, follow=False)

    raw_run = await run("mw-raw", raw_dir, "mw-raw-group")
    clean_run = await run("mw-clean", clean_dir, "mw-clean-group")

    assert raw_run.records == len(raw_records)
    assert clean_run.records == len(clean_records)
    report = duplicate_line_report(raw_dir, clean_dir)
    sessions = report["sessions"]
    assert len(sessions) == 9  # six fixture sessions and three shapes
    assert sessions["shape-cli-copies"]["raw_duplicates"] == 5
    assert sessions["shape-cleaned-children"]["raw_duplicates"] == 3
    assert sessions["shape-echo"]["raw_duplicates"] == 1
    # and the fixtures' two delivery mirrors repeating a reply, which the engine drops (the
    # writer has no copy filter of its own to hide them)
    fixtures = {name: counts for name, counts in sessions.items() if not name.startswith("shape")}
    assert sum(counts["raw_duplicates"] for counts in fixtures.values()) == 2
    assert report["total"]["raw_duplicates"] == 11
    assert report["total"]["clean_duplicates"] == 0
    assert report["total"]["clean_lines"] == report["total"]["raw_lines"] - 11
    assert clean_run.written == report["total"]["clean_lines"]
    assert "assistant (delivered): 1+1 sama dengan bahlil" in markdown(
        clean_dir, "0c4e9163-2c40-4265-ab6e-a52f5dd1cd99"
    )
    written = snapshot(raw_dir), snapshot(clean_dir)

    # The same groups resume at their committed offsets: nothing is left to read.
    again = await run("mw-clean", clean_dir, "mw-clean-group")
    assert (again.records, again.written) == (0, 0)
    # New groups read everything again, as after a crash before any commit: nothing is added.
    replay_raw = await run("mw-raw", raw_dir, "mw-raw-replay")
    replay_clean = await run("mw-clean", clean_dir, "mw-clean-replay")
    assert (replay_raw.records, replay_raw.written) == (len(raw_records), 0)
    assert (replay_clean.records, replay_clean.written) == (len(clean_records), 0)
    assert (snapshot(raw_dir), snapshot(clean_dir)) == written
