"""Per session: the entries session-stream dropped as copies, and the last entries it processed.

The context engine asks about one session at a time: which of its entries were dropped, and
whether the worker has processed the transcript up to the entry the engine is about to send
(`through`). The second question tells "kept" from "not processed yet": an entry that is in no
alert may be kept, or may not have reached the worker. The worker processes a session's entries
in transcript order, so once `through` is processed every entry before it is.

Bounded like the worker's own state: at most `max_ids` dropped entries per session (the oldest
forgotten first, as the worker's id window forgets), RECENT_IDS processed ids, and a session
idle longer than `ttl` (by the times of its records) is forgotten. Nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import xxhash

# How many of the last entries processed each session remembers. `through` is the last message
# entry before the turn; OpenClaw writes a few custom entries after a reply (cache-ttl,
# bootstrap-context), so it is among the last few processed.
RECENT_IDS = 8
_DIGEST = 8  # bytes of an id's digest in `recent`


def _digest(entry_id: str) -> bytes:
    return xxhash.xxh64_digest(entry_id.encode("utf-8", "surrogatepass"))


@dataclass(slots=True)
class SessionVerdicts:
    # The digests of the last RECENT_IDS entries processed, oldest first: 8 bytes each instead
    # of a string object per id, for the millions of sessions a week can hold.
    recent: bytes = b""
    # dropped entry id -> the entry it repeats, as its alert names it; None while there is none
    dropped: dict[str, str] | None = None
    seen_at: float = 0.0

    def processed(self, entry_id: str) -> bool:
        digest = _digest(entry_id)
        recent = self.recent
        if any(recent[i : i + _DIGEST] == digest for i in range(0, len(recent), _DIGEST)):
            return True
        return self.dropped is not None and entry_id in self.dropped


@dataclass(frozen=True, slots=True)
class Answer:
    """`processed`: every entry up to `through` was processed. `dropped`: copy id -> the kept
    entry it repeats (a copy of a copy resolved to the kept one)."""

    processed: bool
    dropped: dict[str, str]
    reason: str | None = None  # why not processed


class VerdictIndex:
    def __init__(self, max_ids: int, ttl: float) -> None:
        if max_ids < 1:
            raise ValueError("max_ids must be at least 1")
        self.max_ids = max_ids
        self.ttl = ttl
        self.sessions: dict[str, SessionVerdicts] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    def _session(self, session_id: str, at: float) -> SessionVerdicts:
        state = self.sessions.get(session_id)
        if state is None:
            state = self.sessions[session_id] = SessionVerdicts()
        state.seen_at = max(state.seen_at, at)
        return state

    def processed(self, session_id: str, entry_id: str, at: float) -> None:
        """The worker processed `entry_id` (kept it, or reported it)."""
        state = self._session(session_id, at)
        state.recent = (state.recent + _digest(entry_id))[-RECENT_IDS * _DIGEST :]

    def dropped(self, session_id: str, entry_id: str, repeats: str, at: float) -> None:
        """The worker dropped `entry_id` as a copy of `repeats`."""
        self.processed(session_id, entry_id, at)
        state = self.sessions[session_id]
        if state.dropped is None:
            state.dropped = {}
        state.dropped.pop(entry_id, None)  # a record read again moves to the newest end
        state.dropped[entry_id] = repeats
        if len(state.dropped) > self.max_ids:
            del state.dropped[next(iter(state.dropped))]

    def answer(self, session_id: str, through: str, predecessors: Iterable[str] = ()) -> Answer:
        """What the context engine may act on for `session_id`, whose transcript it reads up to
        the entry `through`. `predecessors`: the sessions it continues after a compaction moved
        it to a new id (their copies may be carried over), oldest first."""
        state = self.sessions.get(session_id)
        dropped: dict[str, str] = {}
        for earlier in (*predecessors, session_id):
            found = self.sessions.get(earlier)
            if found is not None and found.dropped:
                dropped.update(found.dropped)
        resolved = {copy: _kept_one(repeats, dropped) for copy, repeats in dropped.items()}
        if state is None:
            return Answer(False, resolved, "no entry of the session processed yet")
        if not state.processed(through):
            return Answer(False, resolved, f"entry {through} not processed yet")
        return Answer(True, resolved)

    def forget_idle(self, now: float) -> int:
        """Forget the sessions idle longer than the TTL; how many."""
        idle = [s for s, state in self.sessions.items() if now - state.seen_at > self.ttl]
        for session_id in idle:
            del self.sessions[session_id]
        return len(idle)


def _kept_one(repeats: str, dropped: dict[str, str]) -> str:
    """A copy may repeat a copy dropped before it; follow to the entry that was kept."""
    seen = {repeats}
    while repeats in dropped:
        repeats = dropped[repeats]
        if repeats in seen:
            break
        seen.add(repeats)
    return repeats
