"""The worker's StateStore: two Faust tables co-partitioned with the input topic.

`sessions` maps a session id to its small state (a few hundred bytes); `memory` maps
session + key to one remembered id, idempotency key or tool call. A write changes the table
at once and queues its changelog record, with the session's input partition, for the
worker to send with the batch's other records (`take_changelog`): once per batch, after its
outputs were delivered, instead of inside each event's context.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import faust

from stream.worker import codec
from stream.worker.processor import StoredSession

_SEP = b"\x00"


@dataclass(frozen=True, slots=True)
class ChangelogRecord:
    topic: str
    partition: int
    key: bytes
    value: bytes | None
    headers: None = None


class FaustStateStore:
    def __init__(self, sessions: faust.Table, memory: faust.Table) -> None:
        self.sessions_table = sessions
        self.memory_table = memory
        self._changelog: list[ChangelogRecord] = []

    def take_changelog(self) -> list[ChangelogRecord]:
        """The changelog records of the writes since the last call, in order."""
        records, self._changelog = self._changelog, []
        return records

    def load(self, session_id: str) -> StoredSession | None:
        data = self.sessions_table.data.get(session_id.encode())
        return StoredSession.from_bytes(data) if data is not None else None

    def recall(self, session_id: str, key: str) -> list | None:
        data = self.memory_table.data.get(_memory_key(session_id, key))
        return codec.unpack(data) if data is not None else None

    def save(self, session_id: str, stored: StoredSession, memory: dict[str, list]) -> None:
        partition = stored.partition
        for key, value in memory.items():
            key_bytes = _memory_key(session_id, key)
            self._write(self.memory_table, partition, key_bytes, codec.pack(value))
        self._write(self.sessions_table, partition, session_id.encode(), stored.to_bytes())

    def sessions(self) -> Iterator[tuple[str, StoredSession]]:
        for key, data in list(self.sessions_table.data.items()):
            yield key.decode(), StoredSession.from_bytes(data)

    def forget(self, sessions: dict[str, int]) -> int:
        """Tombstones for the sessions and every memory value they own."""
        prefixes = {sid.encode() + _SEP: partition for sid, partition in sessions.items()}
        for key in list(self.memory_table.data.keys()):
            partition = prefixes.get(key[: key.index(_SEP) + 1])
            if partition is not None:
                self._delete(self.memory_table, partition, key)
        for session_id, partition in sessions.items():
            self._delete(self.sessions_table, partition, session_id.encode())
        return len(sessions)

    def size(self) -> tuple[int, int]:
        return len(self.sessions_table.data), len(self.memory_table.data)

    def _write(self, table: faust.Table, partition: int, key: bytes, value: bytes) -> None:
        table.data[key] = value
        self._changelog.append(
            ChangelogRecord(table.changelog_topic_name, partition, key, value))

    def _delete(self, table: faust.Table, partition: int, key: bytes) -> None:
        table.data.pop(key, None)
        self._changelog.append(
            ChangelogRecord(table.changelog_topic_name, partition, key, None))


def _memory_key(session_id: str, key: str) -> bytes:
    return session_id.encode() + _SEP + key.encode("utf-8", "surrogatepass")
