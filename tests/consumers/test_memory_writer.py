"""The memory writer: rendering, idempotent durable appends, the raw-vs-clean comparison."""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
from pathlib import Path

import orjson
import pytest

from stream.brokers import RunningBroker, free_port
from stream.commands.clean import clean_session
from stream.consumers import memory_writer as mw
from stream.engine import Engine
from stream.engine.entry import parse
from stream.kafka.admin import create_topics
from stream.kafka.producer import make_producer, send_records
from stream.settings import Settings
from stream.sources.session_files import find_session_files, open_lines, session_id_of
from tests.support.data import FIXTURES

_ids = itertools.count(1)


# --- entries ---------------------------------------------------------------------------------


def message(role: str, content: object, **fields: object) -> dict:
    entry_id = fields.pop("id", None) or f"e{next(_ids):05d}"
    parent = fields.pop("parent", None)
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "message": {"role": role, "content": content, **fields},
    }


def user(text: str, **fields: object) -> dict:
    return message("user", [{"type": "text", "text": text}], **fields)


def assistant(text: str | None, thinking: str | None = None, **fields: object) -> dict:
    content: list[dict] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "thinkingSignature": "sig"})
    if text is not None:
        content.append({"type": "text", "text": text})
    fields = {
        "provider": "anthropic",
        "model": "claude-opus-4-5",
        "api": "anthropic-messages",
        "usage": {"input": 100, "output": next(_ids), "totalTokens": 200},
        "stopReason": "stop",
        **fields,
    }
    return message("assistant", content, **fields)


def mirror(text: str, **fields: object) -> dict:
    return assistant(text, provider="openclaw", model="delivery-mirror", usage={}, **fields)


def tool_result(text: str) -> dict:
    return message("toolResult", [{"type": "text", "text": text}], toolCallId="call-1")


def custom(custom_type: str = "openclaw.cache-ttl") -> dict:
    return {"type": "custom", "id": f"c{next(_ids):05d}", "customType": custom_type, "data": {}}


def raw(entry: dict) -> bytes:
    return orjson.dumps(entry)


def markdown(out: Path, session_id: str = "s-1") -> str:
    path = out / f"{mw.file_name(session_id)}.md"
    return path.read_text() if path.exists() else ""


def write(out: Path, entries: list[dict], session_id: str = "s-1") -> int:
    return mw.MemoryWriter(out).write((session_id, raw(e)) for e in entries)


# --- rendering -------------------------------------------------------------------------------


def test_user_and_assistant_text_become_role_lines() -> None:
    assert mw.render(parse(raw(user("what changed?"))), []) == "user: what changed?\n"
    line = mw.render(parse(raw(assistant("Two files.", thinking="hmm"))), [])
    assert line == "assistant: Two files.\n"  # thinking is not visible text


def test_multi_line_text_continues_indented_and_keeps_empty_lines_empty() -> None:
    entry = parse(raw(assistant("First line  \n- a\n\n   \n  - b\n")))
    assert mw.render(entry, []) == "assistant: First line\n  - a\n\n\n    - b\n"


def test_text_blocks_are_joined_and_other_blocks_left_out() -> None:
    content = [
        {"type": "text", "text": "one"},
        {"type": "toolCall", "id": "call-1", "name": "exec", "arguments": {"cmd": "ls"}},
        {"type": "text", "text": "two"},
    ]
    assert mw.render(parse(raw(message("assistant", content))), []) == "assistant: one\n  two\n"


@pytest.mark.parametrize(
    "entry",
    [
        assistant(None, thinking="only thinking"),
        assistant("  \n\n "),
        assistant(None, stopReason="error", errorMessage="overloaded"),
        message("assistant", []),
        user(""),
        tool_result("file contents"),
        custom(),
        {"type": "session", "id": "s-1", "version": 3},
        {"type": "model_change", "id": "m-1", "provider": "anthropic"},
    ],
    ids=["thinking", "blank", "error", "empty", "empty-user", "tool", "custom", "header", "model"],
)
def test_entries_without_visible_user_or_assistant_text_are_not_written(entry: dict) -> None:
    assert mw.render(parse(raw(entry)), ["anything"]) is None


def test_a_mirror_with_new_text_is_an_outbound_message() -> None:
    entry = parse(raw(mirror("Sent to Rusdi")))
    assert mw.render(entry, ["done, sending it now"]) == "assistant (delivered): Sent to Rusdi\n"


def test_a_mirror_marked_by_its_delivery_field_counts_too() -> None:
    marker = {"kind": "message-tool-source-reply"}
    entry = parse(raw(assistant("hi", openclawDeliveryMirror=marker)))
    assert mw.render(entry, []) == "assistant (delivered): hi\n"


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 42.",
        "The   answer\nis 42.",  # other whitespace
        "[[reply_to_current]] The answer is 42.",  # a routing directive is no text
        "answer is",  # a delivered chunk of an earlier line
    ],
)
def test_a_mirror_that_repeats_a_written_line_is_left_out(text: str) -> None:
    written = [mw.line_text("assistant: The answer is 42.")]
    assert mw.render(parse(raw(mirror(text))), written) is None


def test_a_mirror_repeats_whole_words_only() -> None:
    assert mw.render(parse(raw(mirror("ok"))), ["it took a while"]) == (
        "assistant (delivered): ok\n"
    )


def test_lines_are_read_back_with_their_continuations() -> None:
    text = "user: a\n  b\n\n  c\nassistant: d\nassistant (delivered): e\n"
    assert mw.split_lines(text) == [
        "user: a\n  b\n\n  c",
        "assistant: d",
        "assistant (delivered): e",
    ]
    assert mw.line_text("user: a\n  b\n\n  c") == "a b c"


@pytest.mark.parametrize(
    ("session_id", "name"),
    [
        ("0c4e9163-2c40-4265-ab6e-a52f5dd1cd99", "0c4e9163-2c40-4265-ab6e-a52f5dd1cd99"),
        ("agent:main/run 7", None),
        ("../../etc/passwd", None),
        ("..", None),
        ("", None),
        ("x" * 300, None),
    ],
)
def test_file_names_are_safe_and_distinct(session_id: str, name: str | None) -> None:
    made = mw.file_name(session_id)
    if name is not None:
        assert made == name
    else:
        assert made.startswith("_")
        assert len(made) <= 120
        assert all(ch.isalnum() or ch in "._-" for ch in made)
    assert mw.file_name(session_id + "?") != mw.file_name(session_id + "!")


# --- writing files ---------------------------------------------------------------------------


def test_a_session_becomes_one_markdown_file(tmp_path: Path) -> None:
    reply = assistant("Done.\nBoth files.", thinking="plan")
    entries = [
        {"type": "session", "id": "s-1", "version": 3},
        user("rename both files"),
        assistant(None, thinking="plan"),
        tool_result("renamed"),
        custom(),
        reply,
        mirror("Done.\nBoth files.", parent=reply["id"]),  # the delivered copy
        mirror("Rusdi, the files are renamed."),  # what a message tool sent
    ]

    assert write(tmp_path, entries) == 3

    assert markdown(tmp_path) == (
        "user: rename both files\n"
        "assistant: Done.\n"
        "  Both files.\n"
        "assistant (delivered): Rusdi, the files are renamed.\n"
    )


def test_sessions_go_to_their_own_files_and_malformed_lines_are_skipped(tmp_path: Path) -> None:
    writer = mw.MemoryWriter(tmp_path)
    records = [
        ("s-1", raw(user("one"))),
        ("s-2", raw(user("two"))),
        ("s-1", b"not json"),
        ("s-2", b'{"type":"message"}'),
    ]
    assert writer.write(records) == 2
    assert markdown(tmp_path, "s-1") == "user: one\n"
    assert markdown(tmp_path, "s-2") == "user: two\n"
    assert sorted(p.name for p in tmp_path.glob("*.md")) == ["s-1.md", "s-2.md"]


def test_raw_topic_duplicates_with_new_ids_are_written_and_counted(tmp_path: Path) -> None:
    reply = assistant("The deployment finished.", thinking="hmm")
    copy = assistant("The deployment finished.", api="cli", provider="claude-cli")
    write(tmp_path, [user("deploy"), reply, custom(), copy])

    assert markdown(tmp_path).count("assistant: The deployment finished.\n") == 2
    assert mw.duplicate_lines(tmp_path) == {"s-1": (3, 1)}


# --- idempotency -----------------------------------------------------------------------------


def test_records_delivered_again_write_nothing(tmp_path: Path) -> None:
    entries = [user("hello"), assistant("Hi!"), mirror("Hi!"), mirror("Delivered text")]
    records = [("s-1", raw(e)) for e in entries]
    writer = mw.MemoryWriter(tmp_path)
    assert writer.write(records) == 3
    before = markdown(tmp_path)

    assert writer.write(records) == 0  # the same writer, as after a failed commit
    assert mw.MemoryWriter(tmp_path).write(records) == 0  # a restarted writer
    assert mw.MemoryWriter(tmp_path).write(records[1:] + records) == 0  # any redelivered subset

    assert markdown(tmp_path) == before


def test_an_entry_id_repeated_within_one_batch_is_written_once(tmp_path: Path) -> None:
    entry = user("hello")
    assert write(tmp_path, [entry, entry, {**entry, "message": {"role": "user", "content": "x"}}])
    assert markdown(tmp_path) == "user: hello\n"


def test_the_index_lists_each_written_entry_with_the_file_size_after_it(tmp_path: Path) -> None:
    first, second = user("a"), assistant("bc")
    write(tmp_path, [first, custom(), second])
    index = (tmp_path / ".index" / "s-1.ids").read_text()
    assert index == f'[8, "{first["id"]}"]\n[22, "{second["id"]}"]\n'
    assert (tmp_path / "s-1.md").stat().st_size == 22


def test_a_crash_between_markdown_and_index_is_undone_and_redone_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, [user("before the crash")])
    batch = [("s-1", raw(user("during the crash"))), ("s-1", raw(assistant("reply")))]
    real_append = mw._append_durably

    def crash_at_the_index(path: Path, data: bytes) -> None:
        if path.suffix == ".ids":
            raise OSError("power cut")
        real_append(path, data)

    monkeypatch.setattr(mw, "_append_durably", crash_at_the_index)
    with pytest.raises(OSError, match="power cut"):
        mw.MemoryWriter(tmp_path).write(batch)
    monkeypatch.undo()
    assert "during the crash" in markdown(tmp_path)  # on disk, but never committed

    # The offsets were not committed, so the batch comes again to a restarted writer.
    assert mw.MemoryWriter(tmp_path).write(batch) == 2

    assert markdown(tmp_path) == (
        "user: before the crash\nuser: during the crash\nassistant: reply\n"
    )


def test_the_same_writer_reloads_a_session_whose_write_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = mw.MemoryWriter(tmp_path)
    batch = [("s-1", raw(user("once")))]
    real_append = mw._append_durably

    def crash_at_the_index(path: Path, data: bytes) -> None:
        if path.suffix == ".ids":
            raise OSError("disk full")
        real_append(path, data)

    monkeypatch.setattr(mw, "_append_durably", crash_at_the_index)
    with pytest.raises(OSError):
        writer.write(batch)
    monkeypatch.undo()

    assert writer.write(batch) == 1
    assert markdown(tmp_path) == "user: once\n"


def test_a_torn_index_line_is_cut_off_with_its_markdown(tmp_path: Path) -> None:
    first = user("kept")
    write(tmp_path, [first])
    lost = user("lost")
    with (tmp_path / "s-1.md").open("ab") as handle:
        handle.write(b"user: lost\n")
    with (tmp_path / ".index" / "s-1.ids").open("ab") as handle:
        handle.write(b'[21, "' + lost["id"].encode())  # no newline: the crash came mid-line

    assert write(tmp_path, [first, lost, user("next")]) == 2

    assert markdown(tmp_path) == "user: kept\nuser: lost\nuser: next\n"
    assert (tmp_path / ".index" / "s-1.ids").read_text().count("\n") == 3


def test_a_mirror_dropped_as_a_repeat_stays_dropped_when_delivered_again(tmp_path: Path) -> None:
    reply = assistant("Same words.")
    records = [("s-1", raw(e)) for e in (reply, mirror("Same words."), user("more"))]
    mw.MemoryWriter(tmp_path).write(records)
    before = markdown(tmp_path)

    assert mw.MemoryWriter(tmp_path).write(records) == 0
    assert markdown(tmp_path) == before == "assistant: Same words.\nuser: more\n"


def test_sessions_leaving_the_cache_lose_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mw, "CACHED_SESSIONS", 1)
    writer = mw.MemoryWriter(tmp_path)
    batch = [(f"s-{n % 3}", raw(user(f"turn {n}"))) for n in range(9)]

    assert writer.write(batch) == 9
    assert writer.write(batch) == 0

    assert markdown(tmp_path, "s-2") == "user: turn 2\nuser: turn 5\nuser: turn 8\n"


def test_a_writer_reloads_sessions_another_writer_appended_to_after_a_rebalance(
    tmp_path: Path,
) -> None:
    first, second = mw.MemoryWriter(tmp_path), mw.MemoryWriter(tmp_path)
    first.write([("s-1", raw(user("one")))])
    second.write([("s-1", raw(user("two")))])  # the partition moved to the second writer
    first.forget()  # ... and back: revoked partitions make the first writer forget
    third = user("three")

    assert first.write([("s-1", raw(third))]) == 1
    second.forget()  # a redelivery to the second writer, after the next rebalance
    assert second.write([("s-1", raw(third))]) == 0

    assert markdown(tmp_path) == "user: one\nuser: two\nuser: three\n"
    assert mw.MemoryWriter(tmp_path).write([("s-1", raw(third))]) == 0


def test_a_markdown_file_shorter_than_its_index_is_refused(tmp_path: Path) -> None:
    write(tmp_path, [user("hello")])
    (tmp_path / "s-1.md").write_text("")
    with pytest.raises(RuntimeError, match="shorter than its index"):
        write(tmp_path, [user("again")])


# --- the comparison --------------------------------------------------------------------------


def test_duplicate_line_report_counts_per_session_and_in_total(tmp_path: Path) -> None:
    raw_dir, clean_dir = tmp_path / "raw", tmp_path / "clean"
    raw_dir.mkdir()
    clean_dir.mkdir()
    (raw_dir / "a.md").write_text("user: x\nassistant: y\n  z\nassistant: y\n  z\nassistant: y\n")
    (raw_dir / "b.md").write_text("user: x\nuser: x\nuser: x\n")
    (clean_dir / "a.md").write_text("user: x\nassistant: y\n  z\nassistant: y\n")
    (clean_dir / "b.md").write_text("user: x\n")
    (raw_dir / ".index").mkdir()
    (raw_dir / "notes.txt").write_text("user: x\nuser: x\n")

    report = mw.duplicate_line_report(raw_dir, clean_dir)

    assert report == {
        "sessions": {
            "a": {"raw_lines": 4, "raw_duplicates": 1, "clean_lines": 3, "clean_duplicates": 0},
            "b": {"raw_lines": 3, "raw_duplicates": 2, "clean_lines": 1, "clean_duplicates": 0},
        },
        "total": {"raw_lines": 7, "raw_duplicates": 3, "clean_lines": 4, "clean_duplicates": 0},
    }
    assert mw.format_report(report).splitlines() == [
        "session  raw lines  raw duplicates  clean lines  clean duplicates",
        "a                4               1            3                 0",
        "b                3               2            1                 0",
        "total            7               3            4                 0",
    ]


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


def test_an_unreachable_broker_is_reported(tmp_path: Path) -> None:
    args = parse_args(
        ["--out", str(tmp_path), "--once", "--broker", f"kafka://127.0.0.1:{free_port()}"]
    )
    stderr = io.StringIO()
    assert mw.main(args, stderr=stderr) == 1
    assert "cannot read session-events-clean from the Kafka broker" in stderr.getvalue()


# --- against a broker ------------------------------------------------------------------------


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

    async def run(topic: str, out: Path, group: str) -> mw.RunStats:
        writer = mw.MemoryWriter(out)
        return await mw.consume(settings, topic, writer, group, follow=False)

    raw_run = await run("mw-raw", raw_dir, "mw-raw-group")
    clean_run = await run("mw-clean", clean_dir, "mw-clean-group")

    assert raw_run.records == len(raw_records)
    assert clean_run.records == len(clean_records)
    report = mw.duplicate_line_report(raw_dir, clean_dir)
    sessions = report["sessions"]
    assert len(sessions) == 9  # six fixture sessions and three shapes
    assert sessions["shape-cli-copies"]["raw_duplicates"] == 5
    assert sessions["shape-cleaned-children"]["raw_duplicates"] == 3
    assert sessions["shape-echo"]["raw_duplicates"] == 1
    assert report["total"]["raw_duplicates"] == 9
    assert report["total"]["clean_duplicates"] == 0
    assert report["total"]["clean_lines"] == report["total"]["raw_lines"] - 9
    assert clean_run.lines == report["total"]["clean_lines"]
    assert "assistant (delivered): 1+1 sama dengan bahlil" in markdown(
        clean_dir, "0c4e9163-2c40-4265-ab6e-a52f5dd1cd99"
    )
    written = snapshot(raw_dir), snapshot(clean_dir)

    # The same groups resume at their committed offsets: nothing is left to read.
    again = await run("mw-clean", clean_dir, "mw-clean-group")
    assert (again.records, again.lines) == (0, 0)
    # New groups read everything again, as after a crash before any commit: nothing is added.
    replay_raw = await run("mw-raw", raw_dir, "mw-raw-replay")
    replay_clean = await run("mw-clean", clean_dir, "mw-clean-replay")
    assert (replay_raw.records, replay_raw.lines) == (len(raw_records), 0)
    assert (replay_clean.records, replay_clean.lines) == (len(clean_records), 0)
    assert (snapshot(raw_dir), snapshot(clean_dir)) == written


@pytest.mark.integration
def test_main_writes_a_topic_once_and_stops(broker: RunningBroker, tmp_path: Path) -> None:
    settings = Settings.load(None, {"SESSION_STREAM_BROKER": broker.url})
    create_topics(broker.bootstrap, {"mw-main": 2})
    records = [(b"s-1", raw(user("hello"))), (b"s-1", raw(assistant("Hi!")))]
    asyncio.run(publish(settings, "mw-main", records))
    argv = ["--out", str(tmp_path), "--once", "--broker", broker.url, "--clean-topic", "mw-main"]
    stderr = io.StringIO()

    assert mw.main(parse_args([*argv, "--app-id", "mw-main-app"]), stderr=stderr) == 0

    assert markdown(tmp_path) == "user: hello\nassistant: Hi!\n"
    assert "2 lines from 2 records of mw-main written to" in stderr.getvalue()
    missing = ["--out", str(tmp_path), "--once", "--broker", broker.url, "--topic", "input"]
    assert mw.main(parse_args([*missing, "--input-topic", "mw-none"]), stderr=stderr) == 1
    assert "topic 'mw-none' does not exist" in stderr.getvalue()
