"""`session-stream memory-writer`: arguments, exit codes, a run against a broker."""

from __future__ import annotations

import argparse
import asyncio
import io
from pathlib import Path

import pytest

from stream.brokers import RunningBroker, free_port
from stream.commands import memory_writer as mw
from stream.kafka.admin import create_topics
from stream.settings import Settings
from tests.consumers.memory_writer.test_consume import publish
from tests.support.memory import assistant, conversation, raw, user


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    mw.add_arguments(parser)
    return parser.parse_args(argv)


def test_compare_mode_prints_the_table(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    (tmp_path / "clean").mkdir()
    (tmp_path / "raw" / "s.md").write_text("user: x\nuser: x\n")
    (tmp_path / "clean" / "s.md").write_text("user: x\n")
    stdout = io.StringIO()

    args = parse_args(["--compare", str(tmp_path / "raw"), str(tmp_path / "clean")])
    assert mw.main(args, stdout=stdout) == 0

    assert stdout.getvalue().splitlines()[-1].split() == ["total", "2", "1", "1", "0"]


def test_out_or_compare_is_required() -> None:
    with pytest.raises(SystemExit):
        parse_args([])
    args = parse_args(["--out", "d"])
    assert (args.topic, args.once, args.group) == ("clean", False, None)


def test_a_folder_that_cannot_hold_the_files_is_refused_before_the_broker(tmp_path: Path) -> None:
    # no broker listens there: the folder is refused first, in one line
    out = tmp_path / "no-workspace" / "memory" / "session-stream"
    args = parse_args(["--out", str(out), "--broker", f"kafka://127.0.0.1:{free_port()}"])
    stderr = io.StringIO()
    assert mw.main(args, stderr=stderr) == 2
    assert stderr.getvalue() == (
        f"session-stream memory-writer: --out {out}: neither {out.parent} nor "
        f"{out.parent.parent} exists (name a folder in an OpenClaw workspace's memory folder, "
        "or a folder in memory.search.extraPaths)\n")
    assert not out.parent.parent.exists()


def test_an_unreachable_broker_is_reported(tmp_path: Path) -> None:
    args = parse_args(
        ["--out", str(tmp_path), "--once", "--broker", f"kafka://127.0.0.1:{free_port()}"]
    )
    stderr = io.StringIO()
    assert mw.main(args, stderr=stderr) == 1
    assert "cannot read session-events-clean from the Kafka broker" in stderr.getvalue()


@pytest.mark.integration
def test_main_writes_a_topic_once_and_stops(broker: RunningBroker, tmp_path: Path) -> None:
    settings = Settings.load(None, {"SESSION_STREAM_BROKER": broker.url})
    create_topics(broker.bootstrap, {"mw-main": 2})
    records = [(b"s-1", raw(user("hello"))), (b"s-1", raw(assistant("Hi!")))]
    asyncio.run(publish(settings, "mw-main", records))
    argv = ["--out", str(tmp_path), "--once", "--broker", broker.url, "--clean-topic", "mw-main"]
    stderr = io.StringIO()

    assert mw.main(parse_args([*argv, "--app-id", "mw-main-app"]), stderr=stderr) == 0

    assert conversation(tmp_path) == "user: hello\nassistant: Hi!\n"
    assert "2 lines from 2 records of mw-main written to" in stderr.getvalue()
    missing = ["--out", str(tmp_path), "--once", "--broker", broker.url, "--topic", "input"]
    assert mw.main(parse_args([*missing, "--input-topic", "mw-none"]), stderr=stderr) == 1
    assert "topic 'mw-none' does not exist" in stderr.getvalue()
