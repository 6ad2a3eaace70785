"""The worker's StateStore: the dicts of two memory:// Faust tables co-partitioned with the
input topic (or two plain dicts: the benchmark counts what the worker would write with it).

`sessions` maps a session id to its small state (a few hundred bytes); `memory` maps
session + key to one remembered id, idempotency key or tool call. A write changes the table
at once and queues its changelog record, with the session's input partition, for the
worker to send with the batch's other records (`take_changelog`): once per batch, after its
outputs were delivered, instead of inside each event's context.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import faust

from stream.worker import codec
from stream.worker.processor import StoredSession

_SEP = b"\x00"


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


class TableStore:
    def __init__(self, sessions: dict[bytes, bytes], memory: dict[bytes, bytes],
                 sessions_topic: str, memory_topic: str) -> None:
        self._sessions = sessions
        self._memory = memory
        self._sessions_topic = sessions_topic
        self._memory_topic = memory_topic
        self._changelog: list[ChangelogRecord] = []

    @classmethod
    def of_tables(cls, sessions: faust.Table, memory: faust.Table) -> TableStore:
        # The memory:// stores' dicts, read and written directly: the store's mapping API
        # costs a Python call per access and an exception per miss (most recalls miss). Faust
        # types them as mappings; compiled, this class checks that they are dicts.
        return cls(cast(dict, sessions.data.data), cast(dict, memory.data.data),
                   sessions.changelog_topic_name, memory.changelog_topic_name)

    def take_changelog(self) -> list[ChangelogRecord]:
        """The changelog records of the writes since the last call, in order."""
        records, self._changelog = self._changelog, []
        return records

    def load(self, session_id: str) -> StoredSession | None:
        data = self._sessions.get(session_id.encode())
        return StoredSession.from_bytes(data) if data is not None else None

    def recall(self, session_id: str, key: str) -> list | None:
        data = self._memory.get(_memory_key(session_id, key))
        return codec.unpack(data) if data is not None else None

    def save(self, session_id: str, stored: StoredSession, memory: dict[str, list]) -> None:
        partition = stored.partition
        for key, value in memory.items():
            self._write(self._memory, self._memory_topic, partition,
                        _memory_key(session_id, key), codec.pack(value))
        self._write(self._sessions, self._sessions_topic, partition, session_id.encode(),
                    stored.to_bytes())

    def sessions(self) -> Iterator[tuple[str, StoredSession]]:
        for key, data in list(self._sessions.items()):
            yield key.decode(), StoredSession.from_bytes(data)

    def forget(self, sessions: dict[str, int]) -> int:
        """Tombstones for the sessions and every memory value they own."""
        prefixes = {sid.encode() + _SEP: partition for sid, partition in sessions.items()}
        for key in list(self._memory):
            partition = prefixes.get(key[: key.index(_SEP) + 1])
            if partition is not None:
                self._delete(self._memory, self._memory_topic, partition, key)
        for session_id, partition in sessions.items():
            self._delete(self._sessions, self._sessions_topic, partition, session_id.encode())
        return len(sessions)

    def size(self) -> tuple[int, int]:
        return len(self._sessions), len(self._memory)

    def _write(self, data: dict[bytes, bytes], topic: str, partition: int, key: bytes,
               value: bytes) -> None:
        data[key] = value
        self._changelog.append(ChangelogRecord(topic, partition, key, value))

    def _delete(self, data: dict[bytes, bytes], topic: str, partition: int,
                key: bytes) -> None:
        data.pop(key, None)
        self._changelog.append(ChangelogRecord(topic, partition, key, None))


def _memory_key(session_id: str, key: str) -> bytes:
    return session_id.encode() + _SEP + key.encode("utf-8", "surrogatepass")
