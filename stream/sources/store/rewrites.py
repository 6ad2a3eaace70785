"""Rewrites in place: how a reader of OpenClaw's store tells that a transcript it sent changed,
and where to send it again from. No SQLite here: the reader hands over the events.

OpenClaw replaces a transcript's rows in place: `sessions.compact` with `maxLines` keeps the
header and the newest lines renumbered from seq 0, a rewind or retry replaces the suffix from
some seq, an exact rewrite updates rows where they are. Each of these rotates
`transcript_rewrite_watermarks.generation` in the same transaction, and a reader that only asks
for `seq > last` would miss what changed (or, once the session is shorter, everything after it).
So the reader keeps, per session, a chain digest of the events it sent (each one seeded with the
digest before it) and the chain's value every STRIDE events. When the generation changes, or
the session's last seq falls below the last one sent (`rewritten`), it reads the session again
from its start, finds the last mark that still matches (`resume_point`) and sends the session
again from there: every event at and after the first changed one, plus at most STRIDE - 1
unchanged ones before it, which the worker drops as redeliveries (same id, same bytes). A
rotation that changed nothing already sent (a rewrite of rows not read yet) sends nothing.

The marks are the reader's checkpoint (`progress_to_json`, `progress_from_json`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from stream.sources.positions import PositionsError

# Events between two kept chain marks: a rewrite re-sends at most this many - 1 unchanged
# events before the first changed one, and a session's checkpoint grows by one mark per STRIDE.
STRIDE = 64


def chained(digest: int, value: bytes) -> int:
    """The chain digest after `value`: it depends on every event before it, in order."""
    return xxhash.xxh3_64_intdigest(value, seed=digest)


@dataclass(frozen=True)
class Chain:
    """What was sent of one session: how many events, their chain digest, and its marks."""

    count: int = 0
    digest: int = 0
    marks: tuple[int, ...] = ()  # the digest after STRIDE, 2 * STRIDE, ... events

    def extend(self, value: bytes) -> Chain:
        digest = chained(self.digest, value)
        count = self.count + 1
        marks = (*self.marks, digest) if count % STRIDE == 0 else self.marks
        return Chain(count, digest, marks)


@dataclass(frozen=True)
class Mark:
    """Where one session stands: the last seq sent, the generation it was read under, and the
    chain of what was sent (None for a checkpoint written before chains were kept)."""

    seq: int
    generation: str | None = None
    chain: Chain | None = None


@dataclass(frozen=True)
class Progress:
    marks: dict[str, Mark]  # per session
    # PRAGMA data_version of a poll that read everything: while it stays, nothing is new.
    read_version: int | None = None
    # The highest rowid of the events table a complete read covered: appended rows are above it.
    read_rowid: int | None = None

    @property
    def last_seq(self) -> dict[str, int]:
        return {session: mark.seq for session, mark in self.marks.items()}


def rewritten(mark: Mark, generation: str | None, top: int) -> bool:
    """Whether the session may have changed under what was sent: its generation is another,
    it is now shorter than its mark, or the mark predates chains (and cannot tell)."""
    return mark.chain is None or mark.generation != generation or top < mark.seq


def resume_point(chain: Chain, generation: str | None,
                 events: Iterable[tuple[int, bytes]]) -> tuple[Mark | None, bool]:
    """Where to go on after a possible rewrite, from the session's events (seq, value) as they
    are now, in order: the last mark whose chain still matches (None: from the start), and
    whether everything sent is unchanged. Reads no further than was sent."""
    good: Mark | None = None
    current = Chain()
    for seq, value in events:
        current = current.extend(value)
        if current.count == chain.count and current.digest == chain.digest:
            return Mark(seq, generation, chain), True
        if current.count % STRIDE == 0:
            index = current.count // STRIDE - 1
            if index >= len(chain.marks) or chain.marks[index] != current.digest:
                break
            good = Mark(seq, generation, current)
        if current.count >= chain.count:
            break
    return good, False


def chain_of(values: Iterable[bytes]) -> Chain:
    """The chain of these events, from a session's start."""
    chain = Chain()
    for value in values:
        chain = chain.extend(value)
    return chain


# --- checkpoint content ----------------------------------------------------------------------


def progress_to_json(progress: Progress) -> dict[str, Any]:
    """`sessions` keeps the last seq per session, as follow-sqlite always wrote it; `chains`
    adds what rewrite detection needs."""
    chains = {}
    for session, mark in progress.marks.items():
        entry: dict[str, Any] = {"generation": mark.generation}
        if mark.chain is not None:
            entry["count"] = mark.chain.count
            entry["digest"] = f"{mark.chain.digest:016x}"
            entry["marks"] = [f"{digest:016x}" for digest in mark.chain.marks]
        chains[session] = entry
    return {"sessions": progress.last_seq, "chains": chains}


def progress_from_json(data: dict[str, Any] | None, where: Path) -> Progress:
    if data is None:
        return Progress({})
    sessions = data.get("sessions")
    chains = data.get("chains", {})
    if (
        not isinstance(sessions, dict)
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in sessions.values())
        or not isinstance(chains, dict)
    ):
        raise PositionsError(f"checkpoint {where} has no valid sessions object")
    try:
        return Progress({s: _mark(seq, chains.get(s)) for s, seq in sessions.items()})
    except (TypeError, ValueError, KeyError) as error:
        raise PositionsError(f"checkpoint {where} has an invalid chain: {error}") from error


def _mark(seq: int, entry: dict[str, Any] | None) -> Mark:
    if entry is None:
        return Mark(seq)
    chain = None
    if "count" in entry:
        chain = Chain(
            int(entry["count"]),
            int(entry["digest"], 16),
            tuple(int(digest, 16) for digest in entry["marks"]),
        )
    generation = entry.get("generation")
    return Mark(seq, generation if isinstance(generation, str) else None, chain)
