"""Rendering: one entry, one markdown line, or none."""

from __future__ import annotations

import pytest

from stream.consumers.memory_writer import render as mw
from stream.engine.entry import parse
from tests.support.memory import assistant, custom, message, mirror, raw, tool_result, user


def test_user_and_assistant_text_become_role_lines() -> None:
    assert mw.render(parse(raw(user("what changed?")))) == "user: what changed?\n"
    line = mw.render(parse(raw(assistant("Two files.", thinking="hmm"))))
    assert line == "assistant: Two files.\n"  # thinking is not visible text


def test_multi_line_text_continues_indented_and_keeps_empty_lines_empty() -> None:
    entry = parse(raw(assistant("First line  \n- a\n\n   \n  - b\n")))
    assert mw.render(entry) == "assistant: First line\n  - a\n\n\n    - b\n"


def test_a_long_line_is_cut_at_spaces_so_no_chunk_of_openclaw_cuts_a_word() -> None:
    words = [f"word{i:04d}" for i in range(300)]  # 2700 characters on one line
    line = mw.render(parse(raw(user(" ".join(words) + "\nnext"))))
    physical = line.splitlines()
    assert all(len(p) <= mw.WRAP + len("user: ") for p in physical)
    assert physical[0].startswith("user: word0000 ")
    assert all(p.startswith("  word") for p in physical[1:-1])
    assert physical[-1] == "  next"
    # nothing lost, nothing cut: the same words in the same order
    assert " ".join(line.split()[1:]) == " ".join([*words, "next"])


def test_a_word_longer_than_a_line_stays_whole() -> None:
    long_word = "x" * (mw.WRAP * 2)
    assert mw.render(parse(raw(user(f"see {long_word} there")))) == (
        f"user: see\n  {long_word}\n  there\n")


def test_text_blocks_are_joined_and_other_blocks_left_out() -> None:
    content = [
        {"type": "text", "text": "one"},
        {"type": "toolCall", "id": "call-1", "name": "exec", "arguments": {"cmd": "ls"}},
        {"type": "text", "text": "two"},
    ]
    assert mw.render(parse(raw(message("assistant", content)))) == "assistant: one\n  two\n"


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
    assert mw.render(parse(raw(entry))) is None


def test_a_mirror_with_new_text_is_an_outbound_message() -> None:
    entry = parse(raw(mirror("Sent to Rusdi")))
    assert mw.render(entry) == "assistant (delivered): Sent to Rusdi\n"


def test_a_mirror_marked_by_its_delivery_field_counts_too() -> None:
    marker = {"kind": "message-tool-source-reply"}
    entry = parse(raw(assistant("hi", openclawDeliveryMirror=marker)))
    assert mw.render(entry) == "assistant (delivered): hi\n"


def test_a_mirror_is_written_whatever_it_repeats_the_engine_decides() -> None:
    """The clean topic holds what the engine kept; a kept mirror that repeats a reply is the
    engine's call (a send after a send of other words, say), written as it is."""
    entry = parse(raw(mirror("The answer is 42.")))
    assert mw.render(entry) == "assistant (delivered): The answer is 42.\n"


def test_lines_are_read_back_with_their_continuations() -> None:
    text = "user: a\n  b\n\n  c\nassistant: d\nassistant (delivered): e\n"
    assert mw.split_lines(text) == [
        "user: a\n  b\n\n  c",
        "assistant: d",
        "assistant (delivered): e",
    ]
    assert mw.line_text("user: a\n  b\n\n  c") == "a b c"
