"""Telling a transcript rewritten in place, without SQLite: the chain of what was sent against the
events as they are now."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream.sources.positions import PositionsError
from stream.sources.store.rewrites import (
    STRIDE,
    Chain,
    Mark,
    Progress,
    chain_of,
    progress_from_json,
    progress_to_json,
    resume_point,
    rewritten,
)


def events(count: int, changed_from: int | None = None) -> list[tuple[int, bytes]]:
    """(seq, value) of a session of `count` events, numbered from 0; from `changed_from` on,
    each value is another."""
    return [(seq, b"changed %d" % seq if changed_from is not None and seq >= changed_from
             else b"event %d" % seq) for seq in range(count)]


def sent(count: int) -> Chain:
    return chain_of(value for _, value in events(count))


def test_a_chain_keeps_a_mark_every_stride_events() -> None:
    chain = sent(2 * STRIDE + 3)
    assert chain.count == 2 * STRIDE + 3
    assert chain.marks == (sent(STRIDE).digest, sent(2 * STRIDE).digest)


def test_the_chain_depends_on_the_order() -> None:
    assert chain_of([b"a", b"b"]).digest != chain_of([b"b", b"a"]).digest


@pytest.mark.parametrize(("mark", "generation", "top", "expected"), [
    (Mark(9, "g1", Chain()), "g1", 9, False),  # as it was
    (Mark(9, "g1", Chain()), "g1", 20, False),  # appended to
    (Mark(9, "g1", Chain()), "g2", 9, True),  # a new generation
    (Mark(9, "g1", Chain()), "g1", 5, True),  # shorter than what was sent
    (Mark(9, "g1"), "g1", 9, True),  # a checkpoint from before chains
])
def test_what_may_be_a_rewrite(mark: Mark, generation: str, top: int, expected: bool) -> None:
    assert rewritten(mark, generation, top) is expected


def test_a_new_generation_that_changed_nothing_sent_goes_on_where_it_stood() -> None:
    chain = sent(STRIDE + 5)
    mark, unchanged = resume_point(chain, "g2", events(3 * STRIDE))
    assert unchanged
    assert mark == Mark(STRIDE + 4, "g2", chain)


def test_a_change_goes_back_to_the_last_mark_before_it() -> None:
    chain = sent(3 * STRIDE + 5)
    mark, unchanged = resume_point(chain, "g2", events(3 * STRIDE + 5, changed_from=2 * STRIDE + 7))
    assert not unchanged
    assert mark == Mark(2 * STRIDE - 1, "g2", sent(2 * STRIDE))


def test_a_change_before_the_first_mark_starts_over() -> None:
    mark, unchanged = resume_point(sent(STRIDE + 5), "g2", events(STRIDE + 5, changed_from=3))
    assert (mark, unchanged) == (None, False)


def test_a_session_now_shorter_goes_back_to_its_last_mark() -> None:
    mark, unchanged = resume_point(sent(2 * STRIDE + 5), "g2", events(STRIDE + 10))
    assert not unchanged
    assert mark == Mark(STRIDE - 1, "g2", sent(STRIDE))


def test_no_more_is_read_than_was_sent() -> None:
    read: list[int] = []

    def counted():
        for seq, value in events(10 * STRIDE, changed_from=STRIDE + 1):
            read.append(seq)
            yield seq, value

    resume_point(sent(STRIDE + 2), "g2", counted())
    assert len(read) == STRIDE + 2


def test_the_checkpoint_holds_every_mark(tmp_path: Path) -> None:
    progress = Progress({"a": Mark(70, "g1", sent(STRIDE + 7)), "b": Mark(3)})
    data = progress_to_json(progress)
    assert data["sessions"] == {"a": 70, "b": 3}
    assert progress_from_json(data, tmp_path / "checkpoint.json").marks == progress.marks


def test_a_checkpoint_without_sessions_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PositionsError, match="no valid sessions"):
        progress_from_json({"sessions": {"a": "x"}}, tmp_path / "checkpoint.json")
