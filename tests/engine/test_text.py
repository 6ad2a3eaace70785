"""The text helpers walk long texts in slices: the same answers as splitting them whole, at a
small multiple of the text's size in memory."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from stream.engine.text import (
    SPACES,
    normalize,
    normalized_hash,
    normalized_prefix,
    normalized_utf8,
    repetition,
    text_hash,
)
from tests.support.examples import SETTINGS

ROOT = Path(__file__).resolve().parents[2]


# --- the previous implementations, which split whole texts: the reference ----------------------


def reference_hash(text: str) -> int:
    normalized = normalize(text)
    return text_hash(normalized) | 1 if normalized else 0


def reference_repetition(text: str, min_unit: int) -> tuple[int, int] | None:
    stripped = text.strip()
    if len(stripped) < 2 * min_unit:
        return None
    if stripped.find(stripped[: max(min_unit, 1)], 1) < 0:
        return None
    dense = "".join(stripped.split())
    period = (dense + dense).find(dense, 1)
    if period >= len(dense):
        return None
    copies = len(dense) // period
    starts = [i for i, ch in enumerate(stripped) if not ch.isspace()]
    for k in range(copies, 1, -1):
        if copies % k:
            continue
        dense_len = len(dense) // k
        first = stripped[starts[0] : starts[dense_len - 1] + 1]
        if len(first) >= min_unit and all(
            stripped[starts[i * dense_len] : starts[(i + 1) * dense_len - 1] + 1] == first
            for i in range(1, k)
        ):
            return k, len(first)
    return None


# --- generated texts: words, all kinds of whitespace, directives, repeated units --------------

WORDS = st.sampled_from(["a", "ab", "b", "Done.", "x\u00e9", "\U0001f600", "[[audio_as_voice]]"])
SEPARATORS = st.sampled_from(
    [" ", "  ", "\n", "\t", "\u00a0", "\u3000", "\x1c", "\u2028", "\u202f", "\r\n", "\n\n", ""]
)


@st.composite
def texts(draw) -> str:
    words = draw(st.lists(st.tuples(WORDS, SEPARATORS), max_size=12))
    unit = "".join(word + space for word, space in words)
    copies = draw(st.integers(1, 5))
    separators = draw(st.lists(SEPARATORS, min_size=copies, max_size=copies))
    text = "".join(unit.strip() + sep for sep in separators)
    head = draw(st.sampled_from(["", " ", "[[reply_to_current]] ", "\n[[reply_to: 7]]\t"]))
    return head + text + draw(SEPARATORS)


ANY_TEXT = texts() | st.text(max_size=80)
SLICES = st.integers(1, 9)


def test_no_whitespace_lies_above_the_range_the_slicing_knows():
    assert [code for code in range(0x3001, 0x110000) if chr(code).isspace()] == []
    assert set(SPACES) == {chr(code) for code in range(0x3001) if chr(code).isspace()}


def test_every_whitespace_but_the_space_is_not_printable():
    # normalized_utf8 takes a printable text for one whose only whitespace is the space
    assert [char for char in SPACES if char.isprintable()] == [" "]


# texts of every kind of string: ASCII, Latin-1, two and four bytes a character, surrogates
KINDS = st.sampled_from(["a", "\u00e9", "\u2014", "\U0001f600", "\ud800", "\u200b", " ", "\n"])


@SETTINGS
@given(ANY_TEXT | st.text(KINDS))
def test_the_normalized_bytes_are_the_normalized_text_in_utf8(text):
    assert normalized_utf8(text) == normalize(text).encode("utf-8", "surrogatepass")


@SETTINGS
@given(ANY_TEXT, SLICES)
def test_the_sliced_hash_is_the_hash_of_the_normalized_text(text, slice_chars):
    assert normalized_hash(text, slice_chars) == reference_hash(text)
    assert normalized_hash(text) == reference_hash(text)


@SETTINGS
@given(ANY_TEXT, SLICES, st.integers(0, 30))
def test_the_sliced_prefix_is_a_prefix_of_the_normalized_text(text, slice_chars, length):
    assert normalized_prefix(text, length, slice_chars) == normalize(text)[:length]


@SETTINGS
@given(ANY_TEXT, SLICES, st.integers(0, 6))
def test_repetition_finds_what_splitting_the_whole_text_found(text, slice_chars, min_unit):
    assert repetition(text, min_unit, slice_chars) == reference_repetition(text, min_unit)
    assert repetition(text, min_unit) == reference_repetition(text, min_unit)


def test_repetition_with_separators_of_different_kinds():
    unit = "The same paragraph, again and again."
    text = f"{unit}\n\n{unit} {unit}\t{unit}"
    assert repetition(text, 20, 7) == reference_repetition(text, 20) == (4, len(unit))
    assert repetition(f"{text} {unit[:-1]}", 20, 7) is None


# --- one large entry ---------------------------------------------------------------------------

# The peak RSS of the child's own memory: VmHWM starts afresh at exec, where ru_maxrss keeps
# the size of the forking parent (pytest, far larger than what is measured).
_MEASURE = textwrap.dedent(
    """
    import json, sys, time
    from stream.commands.clean import clean_session
    from stream.engine import Action, Engine

    def peak_rss():
        with open("/proc/self/status") as status:
            line = next(line for line in status if line.startswith("VmHWM:"))
        return int(line.split()[1]) * 1024

    path, lengths = sys.argv[1], json.loads(sys.argv[2])
    lines = []
    with open(path, "rb") as handle:  # each record read into one allocation of its size
        for number, length in enumerate(lengths, 1):
            lines.append((number, handle.read(length)))
            handle.read(1)  # its newline: records come without one, as from Kafka
    before = peak_rss()
    start = time.perf_counter()
    verdicts = list(clean_session(Engine(), "big", path, lines))
    seconds = time.perf_counter() - start
    print(json.dumps({"above": peak_rss() - before, "seconds": seconds,
                      "kept": sum(v.action is Action.KEPT for v in verdicts),
                      "alerts": [a.kind for v in verdicts for a in v.alerts]}))
    """
)


def _session_with_one_reply(path: Path, text: str) -> list[int]:
    lines = [
        {"type": "session", "version": 3, "id": "big", "timestamp": "2026-03-15T06:04:17.150Z"},
        {"type": "message", "id": "u1", "parentId": None,
         "message": {"role": "user", "content": [{"type": "text", "text": "write a lot"}]}},
        {"type": "message", "id": "a1", "parentId": "u1",
         "message": {"role": "assistant", "content": [{"type": "text", "text": text}],
                     "provider": "anthropic", "model": "claude-opus-4-5", "stopReason": "stop",
                     # stamped, as OpenClaw writes it: its payload is hashed too
                     "timestamp": 1775362948629}},
    ]
    encoded = [(json.dumps(line) + "\n").encode() for line in lines]
    path.write_bytes(b"".join(encoded))
    return [len(line) - 1 for line in encoded]


def test_cleaning_one_large_reply_costs_a_small_multiple_of_its_size(tmp_path):
    """8 MB of one short word repeated (the repetition check's worst shape: it passes every
    pre-check and is a cascade) and 8 MB of short words in no order. Splitting them whole took
    some 40 times their size; the bound is 3 times, above the records themselves. (A record
    read from a file with its newline costs one more copy: the entry keeps it without.)"""
    size = 8_000_000
    words = ["to", "be", "or", "not", "as", "it", "is", "we"]
    pick = random.Random(3).choice
    shapes = {
        "repeated": " ".join(["word"] * (size // 5)),
        "mixed": " ".join(pick(words) for _ in range(size // 3)),
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name, text in shapes.items():
        path = tmp_path / f"{name}.jsonl"
        lengths = _session_with_one_reply(path, text)
        result = json.loads(
            subprocess.run(
                [sys.executable, "-c", _MEASURE, str(path), json.dumps(lengths)],
                check=True, capture_output=True, text=True, env=env, cwd=ROOT,
            ).stdout
        )
        assert result["kept"] == 3, name
        assert result["above"] <= 3 * len(text), (name, result)
        assert result["seconds"] < 5, (name, result)
        if name == "repeated":
            assert result["alerts"] == ["repetition_cascade"]
