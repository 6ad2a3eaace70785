"""The session files: one per session, safe names, idempotent and crash-safe appends."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream.consumers.memory_writer import compare
from stream.consumers.memory_writer import files as mw
from stream.consumers.memory_writer.index_format import INDEX_FORMAT
from stream.formats import FormatTooNew
from tests.support.memory import (
    assistant,
    conversation,
    custom,
    markdown,
    mirror,
    raw,
    tool_result,
    user,
    write,
)


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


def test_a_session_becomes_one_markdown_file(tmp_path: Path) -> None:
    reply = assistant("Done.\nBoth files.", thinking="plan")
    entries = [
        {"type": "session", "id": "s-1", "version": 3},
        user("rename both files"),
        assistant(None, thinking="plan"),
        tool_result("renamed"),
        custom(),
        reply,
        mirror("Rusdi, the files are renamed."),  # what a message tool sent
    ]

    assert write(tmp_path, entries) == 3

    assert conversation(tmp_path) == (
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
    assert conversation(tmp_path, "s-1") == "user: one\n"
    assert conversation(tmp_path, "s-2") == "user: two\n"
    assert sorted(p.name for p in tmp_path.glob("*.md")) == ["s-1.md", "s-2.md"]


def test_raw_topic_duplicates_with_new_ids_are_written_and_counted(tmp_path: Path) -> None:
    reply = assistant("The deployment finished.", thinking="hmm")
    copy = assistant("The deployment finished.", api="cli", provider="claude-cli")
    write(tmp_path, [user("deploy"), reply, custom(), copy])

    assert conversation(tmp_path).count("assistant: The deployment finished.\n") == 2
    assert compare.duplicate_lines(tmp_path) == {"s-1": (3, 1)}


# --- idempotency -----------------------------------------------------------------------------


def test_records_delivered_again_write_nothing(tmp_path: Path) -> None:
    entries = [user("hello"), assistant("Hi!"), mirror("Hi!"), mirror("Delivered text")]
    records = [("s-1", raw(e)) for e in entries]
    writer = mw.MemoryWriter(tmp_path)
    assert writer.write(records) == 4
    before = markdown(tmp_path)

    assert writer.write(records) == 0  # the same writer, as after a failed commit
    assert mw.MemoryWriter(tmp_path).write(records) == 0  # a restarted writer
    assert mw.MemoryWriter(tmp_path).write(records[1:] + records) == 0  # any redelivered subset

    assert markdown(tmp_path) == before


def test_an_entry_id_repeated_within_one_batch_is_written_once(tmp_path: Path) -> None:
    entry = user("hello")
    assert write(tmp_path, [entry, entry, {**entry, "message": {"role": "user", "content": "x"}}])
    assert conversation(tmp_path) == "user: hello\n"


def test_the_index_lists_each_written_entry_with_the_file_size_after_it(tmp_path: Path) -> None:
    first, second = user("a"), assistant("bc")
    write(tmp_path, [first, custom(), second])
    index = (tmp_path / ".index" / "s-1.ids").read_text()
    # the first line's size includes the file's header, written with it
    header = len(markdown(tmp_path)) - len(conversation(tmp_path))
    assert index == f'[{header + 8}, "{first["id"]}"]\n[{header + 22}, "{second["id"]}"]\n'
    assert (tmp_path / "s-1.md").stat().st_size == header + 22


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

    assert conversation(tmp_path) == (
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
    assert conversation(tmp_path) == "user: once\n"


def test_a_torn_index_line_is_cut_off_with_its_markdown(tmp_path: Path) -> None:
    first = user("kept")
    write(tmp_path, [first])
    lost = user("lost")
    with (tmp_path / "s-1.md").open("ab") as handle:
        handle.write(b"user: lost\n")
    with (tmp_path / ".index" / "s-1.ids").open("ab") as handle:
        handle.write(b'[21, "' + lost["id"].encode())  # no newline: the crash came mid-line

    assert write(tmp_path, [first, lost, user("next")]) == 2

    assert conversation(tmp_path) == "user: kept\nuser: lost\nuser: next\n"
    assert (tmp_path / ".index" / "s-1.ids").read_text().count("\n") == 3


def test_sessions_leaving_the_cache_lose_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mw, "CACHED_SESSIONS", 1)
    writer = mw.MemoryWriter(tmp_path)
    batch = [(f"s-{n % 3}", raw(user(f"turn {n}"))) for n in range(9)]

    assert writer.write(batch) == 9
    assert writer.write(batch) == 0

    assert conversation(tmp_path, "s-2") == "user: turn 2\nuser: turn 5\nuser: turn 8\n"


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

    assert conversation(tmp_path) == "user: one\nuser: two\nuser: three\n"
    assert mw.MemoryWriter(tmp_path).write([("s-1", raw(third))]) == 0


def test_a_file_edited_while_the_writer_holds_its_session_is_not_overwritten(
    tmp_path: Path,
) -> None:
    writer = mw.MemoryWriter(tmp_path)
    writer.write([("s-1", raw(user("hello")))])
    with (tmp_path / "s-1.md").open("a") as handle:
        handle.write("my own note\n")
    with pytest.raises(RuntimeError, match="changed under the writer"):
        writer.write([("s-1", raw(user("again")))])
    assert markdown(tmp_path).endswith("user: hello\nmy own note\n")


def test_a_markdown_file_shorter_than_its_index_is_refused(tmp_path: Path) -> None:
    write(tmp_path, [user("hello")])
    (tmp_path / "s-1.md").write_text("")
    with pytest.raises(RuntimeError, match="shorter than its index"):
        write(tmp_path, [user("again")])


# --- the session facts -----------------------------------------------------------------------


WINDOW_HEADERS = (
    ("openclaw-agent-id", b"main"),
    ("openclaw-session-key", b"agent:main:telegram:direct:777"),
    ("openclaw-previous-session-id", b"s-0"),
    ("openclaw-window-reason", b"reset"),
    ("openclaw-generation", b"g1"),
)


def test_the_file_opens_with_the_session_facts_of_its_first_record(tmp_path: Path) -> None:
    first = {**user("hello again"), "timestamp": "2026-12-01T19:16:30.589Z"}
    later = {**assistant("Hi!"), "timestamp": "2026-12-01T19:16:33.100Z"}
    writer = mw.MemoryWriter(tmp_path)
    # the facts are the first written line's; what later records say does not rewrite them
    writer.write([("s-1", raw(first), WINDOW_HEADERS),
                  ("s-1", raw(later), (("openclaw-agent-id", b"other"),))])

    assert markdown(tmp_path) == (
        "# Session: 2026-12-01 19:16:30 UTC\n"
        "\n"
        "- **Session Key**: agent:main:telegram:direct:777\n"
        "- **Session ID**: s-1\n"
        "- **Agent**: main\n"
        "- **Reason**: reset\n"
        "- **Previous Session**: [s-0](s-0.md)\n"
        "\n"
        "## Conversation\n"
        "\n"
        "user: hello again\n"
        "assistant: Hi!\n"
    )


def test_a_first_window_and_a_source_without_headers_say_only_what_they_know(
    tmp_path: Path,
) -> None:
    headers = (("openclaw-session-key", b"agent:main:main"), ("openclaw-window-reason", b"initial"))
    mw.MemoryWriter(tmp_path).write([("s-1", raw(user("one")), headers),
                                     ("s-2", raw(user("two")))])
    assert markdown(tmp_path, "s-1").split("\n\n")[1] == (
        "- **Session Key**: agent:main:main\n- **Session ID**: s-1")
    # no time on the entry: the title is the id
    assert markdown(tmp_path, "s-2").split("\n\n")[:2] == [
        "# Session: s-2", "- **Session ID**: s-2"]


def test_a_later_day_of_the_conversation_opens_with_its_date(tmp_path: Path) -> None:
    def at(entry: dict, stamp: str) -> dict:
        return {**entry, "timestamp": stamp}

    write(tmp_path, [at(user("monday"), "2026-11-30T23:59:00Z"),
                     at(assistant("late"), "2026-11-30T23:59:30+00:00")])
    # a restarted writer knows the day the file ended on
    write(tmp_path, [at(user("tuesday"), "2026-12-01T00:00:01Z"),
                     at(user("still tuesday"), "2026-12-01T09:00:00Z"),
                     user("no time"),
                     at(user("wednesday, in another zone"), "2026-12-02T01:00:00+02:00")])

    assert conversation(tmp_path) == (
        "user: monday\nassistant: late\n\n### 2026-12-01\n\nuser: tuesday\n"
        "user: still tuesday\nuser: no time\nuser: wednesday, in another zone\n"
    )
    # the messages of the file are what was said, headings aside
    assert len(compare.duplicate_lines(tmp_path)) == 1


def test_header_values_stay_one_line_each(tmp_path: Path) -> None:
    headers = (("openclaw-session-key", b"agent:main\n## Injected\r\n- **Agent**: x"),)
    mw.MemoryWriter(tmp_path).write([("s-1", raw(user("hi")), headers)])
    assert "- **Session Key**: agent:main ## Injected - **Agent**: x\n" in markdown(tmp_path)
    assert "\n## Injected" not in markdown(tmp_path)


@pytest.mark.parametrize(
    "session_id",
    ["../../escaped", "/tmp/absolute", "a/b", "..", ".", ".hidden", "", "x\n# heading",
     "nul\x00byte", "back\\slash", "ö" * 200],
)
def test_an_unsafe_session_id_names_files_inside_the_folder_only(
    tmp_path: Path, session_id: str
) -> None:
    out = tmp_path / "memory"
    headers = (("openclaw-previous-session-id", session_id.encode()),)
    assert mw.MemoryWriter(out).write([(session_id, raw(user("hello")), headers)]) == 1

    made = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    name = mw.file_name(session_id)
    assert made == ["memory/.index/FORMAT", f"memory/.index/{name}.ids", f"memory/{name}.md"]
    text = (out / f"{name}.md").read_text()
    # the link to the previous session names its safe file too
    assert f"]({name}.md)\n" in text or not session_id
    assert conversation(out, session_id) == "user: hello\n"
    assert mw.MemoryWriter(out).write([(session_id, raw(user("hello")))]) == 1  # a new entry


def test_a_write_that_fails_before_its_rename_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, [user("first")])
    before = markdown(tmp_path)

    def power_cut(source: object, target: object) -> None:
        raise OSError("power cut")

    monkeypatch.setattr(mw.os, "replace", power_cut)
    with pytest.raises(OSError, match="power cut"):
        write(tmp_path, [user("second")])
    monkeypatch.undo()
    assert markdown(tmp_path) == before  # whole, never half of the new one

    assert write(tmp_path, [user("second")]) == 1
    assert conversation(tmp_path) == "user: first\nuser: second\n"
    # what the failed write left is not a markdown file: OpenClaw never reads it
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.md")] == ["s-1.md"]


# --- the folder ------------------------------------------------------------------------------


def test_a_missing_folder_is_created_when_its_parent_exists(tmp_path: Path) -> None:
    assert mw.MemoryWriter(tmp_path / "memory").out.is_dir()


def test_a_workspace_without_a_memory_folder_gets_one(tmp_path: Path) -> None:
    """With the session-memory hook off, nothing made the workspace's memory/ folder."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    assert write(workspace / "memory" / "session-stream", [user("hello")]) == 1
    assert (workspace / "memory" / "session-stream" / "s-1.md").is_file()


def _a_file(path: Path) -> Path:
    path.write_text("")
    return path


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda tmp: tmp / "no-workspace" / "memory" / "session-stream",
         "no-workspace exists"),
        (lambda tmp: _a_file(tmp / "file"), "is not a folder"),
        (lambda tmp: Path("/proc/self"), "is not writable"),
        (lambda tmp: Path("/proc/self/memory"), "cannot be created"),
    ],
    ids=["missing-parent", "a-file", "not-writable", "not-creatable"],
)
def test_a_folder_that_cannot_hold_the_files_is_refused_in_one_line(
    tmp_path: Path, make, problem: str
) -> None:
    out = make(tmp_path)
    with pytest.raises(mw.MemoryFolderError) as refused:
        mw.MemoryWriter(out)
    message = str(refused.value)
    assert problem in message and str(out) in message
    assert "\n" not in message


def test_a_new_folder_names_its_index_format(tmp_path: Path) -> None:
    mw.MemoryWriter(tmp_path / "memory")

    assert (tmp_path / "memory" / ".index" / "FORMAT").read_text() == f"{INDEX_FORMAT}\n"


def test_a_folder_written_before_the_index_named_its_format_is_continued_and_named(
        tmp_path: Path) -> None:
    """0.1.0's folders have no FORMAT file: format 1, the layout this version writes."""
    out = tmp_path / "memory"
    hello = raw(user("hello"))
    mw.MemoryWriter(out).write([("s1", hello)])
    (out / ".index" / "FORMAT").unlink()
    before = (out / "s1.md").read_text()

    mw.MemoryWriter(out).write([("s1", hello), ("s1", raw(assistant("hi there")))])

    assert (out / ".index" / "FORMAT").read_text() == "1\n"
    text = (out / "s1.md").read_text()
    assert text.startswith(before) and text.count("hello") == 1 and "hi there" in text


@pytest.mark.parametrize(("content", "refusal"), [("2\n", FormatTooNew),
                                                  ("two", mw.MemoryFolderError)])
def test_a_folder_of_an_index_format_this_version_cannot_read_is_refused(
        tmp_path: Path, content: str, refusal: type[Exception]) -> None:
    out = tmp_path / "memory"
    (out / ".index").mkdir(parents=True)
    (out / ".index" / "FORMAT").write_text(content)

    with pytest.raises(refusal):
        mw.MemoryWriter(out)
