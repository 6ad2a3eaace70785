"""The worker's state: the dicts of two memory:// Faust tables co-partitioned with the input
topic (or two plain dicts: the benchmark counts what the worker would write with it).

`sessions` maps a session id to its `StoredSession`: its state (a few hundred bytes) and, while
the session is small, its memory; `memory` maps session + key to one remembered id, idempotency
key or tool call of a session whose memory outgrew its stored value. The store owns how values
are encoded (`codec`, in the state format it was given to write), what a stored session is and
where a session's memory lives. A batch writes through a `TableTransaction`: its writes change
the tables at once, and `close()` ends it with the changelog records that make them durable,
which the batch's commit sends.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from stream.engine import SessionState
from stream.engine.stored import STATE_FIELDS
from stream.worker import codec

_SEP = b"\x00"
# The first state format whose stored session can hold the session's memory.
_INLINE_FORMAT: Final = 3
# A session's memory lives in its stored value until it holds more than this many values, then
# in the memory table for good. Most sessions stay small, and in the table every value costs a
# key, a value and a dict slot, many times its data. But a state write rewrites the whole memory
# held there, so the changelog grows with the bound: 8 holds a keyed user turn and its direct
# reply (7). What each choice measured: docs/performance.md, on state format 3.
INLINE_VALUES: Final = 8


@dataclass(slots=True)
class StoredSession:
    state: SessionState
    touched: float
    partition: int
    # All the session remembers while it lives here (state format 3 on); None while it lives
    # in the memory table.
    memory: dict[str, list] | None = None

    def to_bytes(self, state_format: int = codec.STATE_FORMAT) -> bytes:
        # An earlier format holds fewer fields (stored.STATE_FIELDS): 0.1.0 loses the state of
        # a turn a completion wake opened (a `repeated_answer` missed) rather than the whole
        # session (its redeliveries kept); a worker writing formats 2 and 3 runs without what
        # format 4 added, which it may still find in a state a newer worker wrote mid-upgrade.
        state = self.state.to_list()
        del state[STATE_FIELDS[state_format]:]
        value: list = [int(self.touched), self.partition, state]
        if self.memory is not None:
            value.append(codec.pack_memory(self.memory))
        return codec.pack(value, state_format)

    @classmethod
    def from_bytes(cls, data: bytes) -> StoredSession:
        value = codec.unpack(data)
        if len(value) == 4:
            touched, partition, state, memory = value
            return cls(SessionState.from_list(state), touched, partition,
                       codec.unpack_memory(memory))
        touched, partition, state = value
        return cls(SessionState.from_list(state), touched, partition)


@dataclass(slots=True, init=False)
class ChangelogRecord:
    topic: str
    partition: int
    key: bytes
    value: bytes | None
    headers: None

    def __init__(self, topic: str, partition: int, key: bytes, value: bytes | None) -> None:
        # Written out, one per table write: compiled, a generated __init__ stays interpreted.
        self.topic = topic
        self.partition = partition
        self.key = key
        self.value = value
        self.headers = None


class TransactionClosed(Exception):
    """A write to a transaction whose changelog was handed over: it would never be durable."""


class TableStore:
    """The two tables' dicts (compiled, this class checks that they are dicts) and the
    changelog topics that make them durable."""

    def __init__(self, sessions: dict[bytes, bytes], memory: dict[bytes, bytes],
                 sessions_topic: str, memory_topic: str,
                 state_format: int = codec.STATE_FORMAT) -> None:
        if state_format not in codec.WRITABLE:
            raise ValueError(f"state format {state_format} is not one this version writes")
        self._sessions = sessions
        self._memory = memory
        self._sessions_topic = sessions_topic
        self._memory_topic = memory_topic
        self._state_format = state_format

    @property
    def state_format(self) -> int:
        """The format it writes (the engine remembers no more than it holds)."""
        return self._state_format

    def transaction(self) -> TableTransaction:
        return TableTransaction(self._sessions, self._sessions_topic, self._memory,
                                self._memory_topic, self._state_format)

    def load(self, session_id: str) -> StoredSession | None:
        data = self._sessions.get(session_id.encode())
        return StoredSession.from_bytes(data) if data is not None else None

    def recall(self, session_id: str, key: str) -> list | None:
        data = self._memory.get(_memory_key(session_id, key))
        return codec.unpack(data) if data is not None else None

    def sessions(self) -> Iterator[tuple[str, float, int]]:
        """Each stored session's id, when it was last written and its partition: what the
        TTL sweep reads of every session, without decoding its state or memory."""
        for key, data in list(self._sessions.items()):
            value = codec.unpack(data)
            yield key.decode(), value[0], value[1]

    def size(self) -> tuple[int, int]:
        return len(self._sessions), len(self._memory)

    def drop_partitions(self, partitions: set[int]) -> int:
        """Remove every session of `partitions` and all it remembers, with no changelog: the
        values the worker wrote since the partitions' last committed transaction can no longer
        be told from the committed ones, and a later assignment restores them from the
        changelogs. Returns how many sessions were removed."""
        dropped: set[bytes] = set()
        for key, data in list(self._sessions.items()):
            if codec.unpack(data)[1] in partitions:
                dropped.add(key + _SEP)
        if dropped:
            for key in [k for k in self._memory if k[: k.index(_SEP) + 1] in dropped]:
                del self._memory[key]
            for prefix in dropped:
                del self._sessions[prefix[:-1]]
        return len(dropped)


class TableTransaction:
    """One batch's writes to the tables it was given. They change the tables at once, because
    the next batch is processed while this one is committed and must see them; what makes
    them durable is the changelog `close` hands over."""

    def __init__(self, sessions: dict[bytes, bytes], sessions_topic: str,
                 memory: dict[bytes, bytes], memory_topic: str,
                 state_format: int = codec.STATE_FORMAT) -> None:
        self._sessions = sessions
        self._sessions_topic = sessions_topic
        self._memory = memory
        self._memory_topic = memory_topic
        self._state_format = state_format
        self._changelog: list[ChangelogRecord] = []
        self._closed = False

    def save(self, session_id: str, stored: StoredSession, written: dict[str, list]) -> None:
        """Write a session's state and what its batch remembered (`written`). A memory that
        lives in the stored value (`stored.memory`, `written` included) stays there while it
        fits and the format holds it; else every value of it moves to the memory table."""
        if stored.memory is not None and not self._holds(stored.memory):
            written = stored.memory
            stored.memory = None
        partition = stored.partition
        if stored.memory is None:
            for key, value in written.items():
                self._write(self._memory, self._memory_topic, partition,
                            _memory_key(session_id, key), codec.pack(value, self._state_format))
        self._write(self._sessions, self._sessions_topic, partition, session_id.encode(),
                    stored.to_bytes(self._state_format))

    def forget(self, sessions: dict[str, int]) -> int:
        """Tombstones for the sessions and every memory value they own."""
        prefixes = {sid.encode() + _SEP: partition for sid, partition in sessions.items()}
        for key in list(self._memory):
            partition = prefixes.get(key[: key.index(_SEP) + 1])
            if partition is not None:
                self._write(self._memory, self._memory_topic, partition, key, None)
        for session_id, partition in sessions.items():
            self._write(self._sessions, self._sessions_topic, partition, session_id.encode(),
                        None)
        return len(sessions)

    def _holds(self, memory: dict[str, list]) -> bool:
        """Whether a stored session in this transaction's format holds `memory`."""
        return self._state_format >= _INLINE_FORMAT and len(memory) <= INLINE_VALUES

    def close(self) -> list[ChangelogRecord]:
        """End the transaction: the changelog records of its writes, in write order. A write
        after this raises TransactionClosed."""
        self._closed = True
        return self._changelog

    def _write(self, data: dict[bytes, bytes], topic: str, partition: int, key: bytes,
               value: bytes | None) -> None:
        """Set `key` to `value`, or delete it for None (a tombstone in the changelog)."""
        if self._closed:
            raise TransactionClosed(f"a write to {topic} after its changelog was handed over")
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
        self._changelog.append(ChangelogRecord(topic, partition, key, value))


def _memory_key(session_id: str, key: str) -> bytes:
    return session_id.encode() + _SEP + key.encode("utf-8", "surrogatepass")
