"""`produce` publishes session files line for line, in order, to the input topic."""

from __future__ import annotations

import gzip
import io
from collections import defaultdict
from pathlib import Path

import pytest

from stream.brokers import RunningBroker, free_port
from stream.commands import produce
from stream.kafka.admin import create_topics
from stream.sources.produce import produce_files
from stream.sources.session_files import find_session_files, open_lines, session_id_of
from tests.support.data import FIXTURES
from tests.support.topics import PARTITIONS, parse, read_all, settings_for


def test_produce_reports_an_unreachable_broker() -> None:
    args = parse(produce, [str(FIXTURES), "--broker", f"kafka://127.0.0.1:{free_port()}"])
    stderr = io.StringIO()
    assert produce.main(args, stderr=stderr) == 1
    assert "cannot publish to the Kafka broker at 127.0.0.1:" in stderr.getvalue()


def expected_by_key(paths: list[Path]) -> dict[bytes, list[bytes]]:
    """Per key, the non-blank lines of its session files in file order."""
    expected: dict[bytes, list[bytes]] = defaultdict(list)
    for given in paths:
        for path in find_session_files(given):
            lines = [body for _, body in open_lines(path)]
            expected[session_id_of(path, lines[0]).encode()] += lines
    return dict(expected)


@pytest.fixture
def extra_sessions(tmp_path: Path) -> Path:
    """A session with a malformed line and a blank one, and a gzipped session without header."""
    (tmp_path / "bad.jsonl").write_bytes(
        b'{"type":"session","id":"with-bad-line"}\n'
        b'{"type":"message","id":"m1"\n'
        b"\n"
        b'{"type":"message","id":"m2"}\r\n'
    )
    with gzip.open(tmp_path / "zipped-session.jsonl.gz", "wb") as handle:
        handle.write(b'{"type":"message","id":"z1"}\n{"type":"message","id":"z2"}')
    return tmp_path


@pytest.mark.integration
async def test_produce_sends_every_line_byte_for_byte_in_session_order(
    broker: RunningBroker, extra_sessions: Path
) -> None:
    settings = settings_for(broker, input_topic="produce-input")
    create_topics(broker.bootstrap, {settings.input_topic: PARTITIONS})
    paths = [FIXTURES, extra_sessions]

    report = await produce_files(settings, [str(p) for p in paths])

    expected = expected_by_key(paths)
    assert expected[b"with-bad-line"] == [
        b'{"type":"session","id":"with-bad-line"}',
        b'{"type":"message","id":"m1"',
        b'{"type":"message","id":"m2"}',
    ]
    assert expected[b"zipped-session"] == [
        b'{"type":"message","id":"z1"}',
        b'{"type":"message","id":"z2"}',
    ]
    assert report.files == 9  # seven fixture sessions; the checkpoint and sessions.json skipped
    assert report.records == sum(map(len, expected.values()))
    assert dict(report.per_session) == {k.decode(): len(v) for k, v in expected.items()}
    assert report.unreadable == []
    received, partitions = await read_all(settings, settings.input_topic)
    assert received == expected
    assert all(len(used) == 1 for used in partitions.values())
    assert len(set().union(*partitions.values())) > 1  # the keys did spread


@pytest.mark.integration
def test_produce_main_sends_what_it_can_and_fails_on_an_unreadable_input(
    broker: RunningBroker, extra_sessions: Path
) -> None:
    missing = extra_sessions / "missing.jsonl"
    args = parse(
        produce,
        [
            str(extra_sessions),
            str(missing),
            "--broker",
            broker.url,
            "--input-topic",
            "produce-main",
        ],
    )
    stderr = io.StringIO()

    assert produce.main(args, stderr=stderr) == 1

    assert f"cannot read {missing}: No such file or directory" in stderr.getvalue()
    assert "produced 5 records of 2 sessions from 2 files to produce-main; 1 unreadable" in (
        stderr.getvalue()
    )
