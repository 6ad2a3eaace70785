"""The session files and their index: durable, idempotent on (session id, entry id).

    OUT/<session>.md            the session's memory, what OpenClaw's memory-core indexes
    OUT/.index/<session>.ids    its commit record (not .md: memory-core reads only .md files)

Writing is idempotent on (session id, entry id): the index lists the entries already written,
each with the size the markdown file had after it. Each batch makes the markdown whole and
durable first (a new file written beside it, fsynced, renamed over it: a reader never sees
half of it), the index second; on load anything in the markdown beyond the last indexed size
(a batch whose index line never made it) is cut off, so the redelivered records write it
again, exactly once. A session id that is not a safe file name is changed into one, with a
hash of the id against clashes: no id names a file outside OUT.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from stream.consumers.memory_writer.folders import (
    INDEX_DIR,
    Folders,
    MemoryFolderError,
    OneFolder,
)
from stream.consumers.memory_writer.names import file_name
from stream.consumers.memory_writer.render import (
    SessionFacts,
    day_of,
    entry_time,
    last_day,
    render,
    render_day,
    render_header,
)
from stream.durable import fsync_folder
from stream.engine.entry import Entry, MalformedEntry, parse
from stream.kafka.producer import Headers

# (session id, raw entry) or (session id, raw entry, the headers of the Kafka record it came in)
SessionEntry = tuple[str, bytes] | tuple[str, bytes, Headers]

CACHED_SESSIONS = 1000  # sessions whose ids stay in memory between batches
__all__ = ["MemoryFolderError", "MemoryWriter", "file_name"]


class SessionFile:
    """One session's markdown file and its index, loaded once and written in batches."""

    def __init__(self, session_id: str, markdown: Path, index: Path) -> None:
        self.session_id, self.markdown, self.index = session_id, markdown, index
        self.ids: set[str] = set()
        self.size = 0  # size of the markdown file after the last indexed line
        self._load_index()
        self.day = last_day(self._recover_markdown().decode("utf-8", "replace"))
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

    def _recover_markdown(self) -> bytes:
        content = self.markdown.read_bytes() if self.markdown.exists() else b""
        if len(content) > self.size:
            # Written, but the crash came before the index line that commits it: undone here
            # (as a whole file, as every write is), written again when the records come again.
            content = content[: self.size]
            if content:
                _replace_durably(self.markdown, content)
            else:
                self.markdown.unlink()
        elif len(content) < self.size:
            raise RuntimeError(f"{self.markdown} is shorter than its index says; it was edited")
        return content

    def add(self, entry: Entry, headers: dict[str, str]) -> None:
        if entry.id is None or entry.id in self.ids:
            return  # written before: this is a redelivery
        line = render(entry)
        if line is None:
            return  # nothing to remember: no need to index it, rendering it again skips it too
        moment = entry_time(entry)
        head = ""
        if self.size == 0 and not self._pending:
            head = render_header(SessionFacts.of(self.session_id, headers, moment), file_name)
        elif moment is not None and day_of(moment) != self.day:
            head = render_day(day_of(moment))
        if moment is not None:
            self.day = day_of(moment)
        data = (head + line).encode("utf-8", "replace")  # lone surrogates cannot be UTF-8: "?"
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
        # Read again rather than kept: a thousand cached sessions would hold their whole text.
        content = self.markdown.read_bytes() if self.size else b""
        if len(content) != self.size:
            raise RuntimeError(f"{self.markdown} changed under the writer; it was edited")
        content += b"".join(data for _, data in self._pending)
        # Order matters: the markdown durable first, then the index that commits it.
        _replace_durably(self.markdown, content)
        _append_durably(self.index, b"".join(records))
        count, self.size = len(self._pending), end
        self._pending.clear()
        return count


def _replace_durably(path: Path, data: bytes) -> None:
    """Make `data` the whole of `path`, on disk when this returns; a reader (OpenClaw's memory
    watcher, its indexer) sees the file before or after, never half of it."""
    temporary = path.parent / INDEX_DIR / f"{path.name}.partial"
    with temporary.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    fsync_folder(path.parent)


def _append_durably(path: Path, data: bytes) -> None:
    """Append `data` and return once it is on disk."""
    created = not path.exists()
    with path.open("ab") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    if created:
        fsync_folder(path.parent)


class MemoryWriter:
    """Writes records to the memory files of `folders` (a path: all in that folder); knows
    nothing about Kafka."""

    def __init__(self, folders: Path | Folders) -> None:
        """MemoryFolderError when a folder cannot hold the files (see `folders.open_folder`)."""
        self.folders = OneFolder(folders) if isinstance(folders, Path) else folders
        self._sessions: dict[str, SessionFile] = {}

    @property
    def out(self) -> Path:
        """The one folder, when there is one."""
        assert isinstance(self.folders, OneFolder)
        return self.folders.out

    def write(self, entries: Iterable[SessionEntry]) -> int:
        """Write the lines of (session id, raw entry[, record headers]) entries; durable when
        it returns.

        Returns the number of lines written. Entries already written (by entry id) and lines
        that are not JSON entries are skipped.
        """
        touched: dict[str, SessionFile] = {}
        written = 0
        try:
            for session_id, raw, *headers in entries:
                try:
                    entry = parse(raw)
                except MalformedEntry:
                    continue  # the raw topic carries such lines; the worker dead-letters them
                decoded = _decoded(headers[0] if headers else ())
                touched[session_id] = self._session(session_id, decoded)
                touched[session_id].add(entry, decoded)
            for file in touched.values():
                written += file.flush()
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

    def _session(self, session_id: str, headers: dict[str, str]) -> SessionFile:
        file = self._sessions.pop(session_id, None)
        if file is None:
            name, folder = file_name(session_id), self.folders.folder_for(headers)
            file = SessionFile(session_id, folder / f"{name}.md",
                               folder / INDEX_DIR / f"{name}.ids")
        self._sessions[session_id] = file  # (re)inserted last: the most recently used
        return file

    def forget(self) -> None:
        """Drop what is cached: another writer may append to these sessions from now on."""
        self._sessions.clear()


def _decoded(headers: Iterable[tuple[str, bytes]]) -> dict[str, str]:
    return {name: value.decode("utf-8", "replace") for name, value in headers
            if isinstance(value, bytes)}
