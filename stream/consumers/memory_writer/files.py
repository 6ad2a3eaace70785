"""The session files and their index: durable, idempotent on (session id, entry id).

Writing is idempotent on (session id, entry id): beside each markdown file,
`OUT/.index/<session>.ids` lists the entries already written, each with the size the markdown
file had after it. That index is the commit record of the markdown file: the markdown is
appended and fsynced first, the index second, and on load anything in the markdown beyond the
last indexed size (an append whose index line never made it) is cut off, so the redelivered
records write it again, exactly once.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from stream.consumers.memory_writer.render import render
from stream.engine.entry import Entry, MalformedEntry, parse
from stream.engine.text import digest64

INDEX_DIR = ".index"
CACHED_SESSIONS = 1000  # sessions whose ids stay in memory between batches
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def file_name(session_id: str) -> str:
    """A safe file name for a session id; ids that had to change get a hash against clashes."""
    safe = _UNSAFE.sub("_", session_id)[:100]
    if safe and safe == session_id and not safe.startswith("."):
        return safe
    return f"_{safe}-{digest64(session_id.encode('utf-8', 'surrogatepass')):016x}"


class SessionMemory:
    """One session's markdown file and its index, loaded once and appended in batches."""

    def __init__(self, markdown: Path, index: Path) -> None:
        self.markdown, self.index = markdown, index
        self.ids: set[str] = set()
        self.size = 0  # size of the markdown file after the last indexed line
        self._load_index()
        self._recover_markdown()
        self._pending: list[tuple[str, bytes]] = []

    def _load_index(self) -> None:
        data = self.index.read_bytes() if self.index.exists() else b""
        complete = data[: data.rfind(b"\n") + 1]
        for record in complete.splitlines():
            self.size, entry_id = json.loads(record)
            self.ids.add(entry_id)
        if len(complete) < len(data):
            # A crash cut the last index line short: that line never committed, and left in
            # place it would run into the next one.
            os.truncate(self.index, len(complete))

    def _recover_markdown(self) -> None:
        actual = self.markdown.stat().st_size if self.markdown.exists() else 0
        if actual > self.size:
            # Appended and maybe fsynced, but the crash came before the index line: undone
            # here, written again when the records are redelivered.
            os.truncate(self.markdown, self.size)
        elif actual < self.size:
            raise RuntimeError(f"{self.markdown} is shorter than its index says; it was edited")

    def add(self, entry: Entry) -> None:
        if entry.id is None or entry.id in self.ids:
            return  # written before: this is a redelivery
        line = render(entry)
        if line is None:
            return  # nothing to remember: no need to index it, rendering it again skips it too
        data = line.encode("utf-8", "replace")  # lone surrogates cannot be UTF-8: "?"
        self.ids.add(entry.id)
        self._pending.append((entry.id, data))

    def flush(self) -> int:
        """Make the pending lines durable; returns how many there were."""
        if not self._pending:
            return 0
        records, end = [], self.size
        for entry_id, data in self._pending:
            end += len(data)
            # JSON with ASCII escapes: any id string, one line.
            records.append(json.dumps([end, entry_id]).encode("ascii") + b"\n")
        # Order matters: markdown durable first, then the index that commits it.
        _append_durably(self.markdown, b"".join(data for _, data in self._pending))
        _append_durably(self.index, b"".join(records))
        count, self.size = len(self._pending), end
        self._pending.clear()
        return count


def _append_durably(path: Path, data: bytes) -> None:
    """Append `data` and return once it is on disk."""
    created = not path.exists()
    with path.open("ab") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    if created:
        # A new file's name is durable once its directory is synced.
        descriptor = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


class MemoryWriter:
    """Writes records to the memory files in `out`; knows nothing about Kafka."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        (self.out / INDEX_DIR).mkdir(parents=True, exist_ok=True)
        self._sessions: dict[str, SessionMemory] = {}

    def write(self, records: Iterable[tuple[str, bytes]]) -> int:
        """Append the lines of (session id, raw entry) records; durable when it returns.

        Returns the number of lines written. Records already written (by entry id) and lines
        that are not JSON entries are skipped.
        """
        touched: dict[str, SessionMemory] = {}
        written = 0
        try:
            for session_id, raw in records:
                try:
                    entry = parse(raw)
                except MalformedEntry:
                    continue  # the raw topic carries such lines; the worker dead-letters them
                touched[session_id] = self._session(session_id)
                touched[session_id].add(entry)
            for memory in touched.values():
                written += memory.flush()
            # All flushed, so any session can go and be loaded from disk when it comes back;
            # the least recently used go first.
            while len(self._sessions) > CACHED_SESSIONS:
                del self._sessions[next(iter(self._sessions))]
        except BaseException:
            # Their cached state may be ahead of the disk: load these sessions again next time.
            for session_id in touched:
                self._sessions.pop(session_id, None)
            raise
        return written

    def _session(self, session_id: str) -> SessionMemory:
        memory = self._sessions.pop(session_id, None)
        if memory is None:
            name = file_name(session_id)
            memory = SessionMemory(self.out / f"{name}.md", self.out / INDEX_DIR / f"{name}.ids")
        self._sessions[session_id] = memory  # (re)inserted last: the most recently used
        return memory

    def forget(self) -> None:
        """Drop what is cached: another writer may append to these sessions from now on."""
        self._sessions.clear()
