"""`session-stream follow`: publish what OpenClaw appends to its session files, as it comes.

Polls every session file under DIR, at any depth (OpenClaw up to 2026.7 writes
agents/<agent>/sessions/<id>.jsonl), and publishes each new non-blank line byte for byte to the
input topic, keyed by the session id (the header's id, else the file name up to .jsonl), in file
order. A line is sent once its newline is written; an unterminated last line waits for it.

Files are known by device and inode, so a session OpenClaw archives by renaming it
(<id>.jsonl.reset.<ts>, <id>.jsonl.deleted.<ts>) keeps its position and is not sent again. A file
with an unknown inode that holds the same bytes as a vanished file up to that file's position (a
copy, a restore, the folder on another mount) takes over the position too. Any other file is new
and is sent from its start, archives included: a first run publishes the history once.
A file now shorter than its position, or whose bytes before it changed (rewritten in place, its
inode reused; checked whenever its size changed), is sent again from its start with a warning:
duplicates, which the worker drops by entry id, rather than losses.

Compaction checkpoints (*.checkpoint.*), locks (*.lock), sessions.json and gzipped files are
ignored, and so are OpenClaw's runtime traces (<id>.trajectory.jsonl whose first line is a trace
record; see stream.sources.session_files): such a file is looked at once its first line is
complete, and a trace is then left alone for good. Positions are checkpointed after the broker
acknowledged the lines.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import BinaryIO

from stream.sources.base import Batch, Record, SourceError
from stream.sources.positions import PositionsError, load_positions, save_positions
from stream.sources.session_files import (
    first_line,
    is_session_file,
    is_trace_line,
    may_be_trace,
    session_id_of,
)

log = logging.getLogger(__name__)

KIND = "follow"
DEFAULT_CHECKPOINT = ".session-stream/follow.checkpoint.json"
# Bytes at each end of what was read that identify a file's content (see _fingerprint).
FINGERPRINT_BYTES = 4096
# Bytes read per pass over all files: bounds memory when catching up on a large backlog.
READ_BUDGET = 8 * 1024 * 1024
# A file renamed while a pass walks the folder can be missed by that pass; it is remembered
# this many passes, so that it is recognised under its new name rather than sent again.
MISSING_PASSES_KEPT = 2

Identity = tuple[int, int]  # (st_dev, st_ino)


def _new_digest() -> hashlib.blake2b:
    return hashlib.blake2b(digest_size=16)


_NOTHING_READ = _new_digest().hexdigest()


@dataclass(frozen=True)
class Position:
    """How far one file was read. The offset is 0 or just past a newline."""

    path: str  # relative to DIR, where the file was last seen
    device: int
    inode: int
    offset: int
    fingerprint: str  # of the bytes before offset
    session_id: str | None = None  # fixed by the file's first non-blank line
    missing: int = 0  # consecutive passes that did not find the file

    @property
    def identity(self) -> Identity:
        return self.device, self.inode


Positions = dict[Identity, Position]


@dataclass(frozen=True)
class Found:
    """A session file as one pass saw it."""

    path: Path
    relative: str
    identity: Identity
    size: int


class FileFollower:
    """Reads the new complete lines of the session files under `root`; sends nothing itself."""

    def __init__(self, root: Path, checkpoint: Path) -> None:
        if not root.is_dir():
            raise SourceError(f"{root} is not a directory")
        self.root = root
        self.checkpoint = checkpoint
        self.origin = str(root.resolve())
        self.positions = _load(checkpoint, self.origin)
        self._reported_unreadable: set[Path] = set()
        # Files named like a runtime trace, by identity: whether their first line says trace.
        self._traces: dict[Identity, bool] = {}

    def poll(self) -> Batch[Positions]:
        found = self._scan()
        vanished = {i: p for i, p in self.positions.items() if i not in found}
        positions: Positions = {}
        records: list[Record] = []
        budget = READ_BUDGET
        more = False
        for identity, file in found.items():
            position = self._locate(file, vanished)
            if budget > 0:
                position, new, cut = self._read(file, position, budget)
                records += new
                budget -= sum(len(record[1]) for record in new)
                more = more or cut
            else:
                more = True
            positions[identity] = position
        for identity, position in vanished.items():
            if position.missing < MISSING_PASSES_KEPT:
                positions[identity] = replace(position, missing=position.missing + 1)
        return Batch(records, positions, more)

    def commit(self, batch: Batch[Positions]) -> None:
        if batch.position != self.positions:
            files = [asdict(position) for position in batch.position.values()]
            save_positions(self.checkpoint, KIND, self.origin, {"files": files})
        self.positions = batch.position

    def close(self) -> None:
        """Nothing is held open between passes."""

    def _scan(self) -> dict[Identity, Found]:
        """Every followed file under the root, by identity, in a stable order."""
        found: dict[Identity, Found] = {}
        traces: dict[Identity, bool] = {}
        for directory, subdirectories, names in os.walk(self.root):
            subdirectories.sort()
            for name in sorted(names):
                path = Path(directory, name)
                if not _is_followed(path):
                    continue
                try:
                    info = path.stat()
                except FileNotFoundError:
                    continue  # renamed or deleted since the listing; the next pass sees it
                if not stat.S_ISREG(info.st_mode):
                    continue
                identity = (info.st_dev, info.st_ino)
                if may_be_trace(path):
                    trace = self._trace_verdict(path, identity)
                    if trace is None:
                        continue  # its first line is not complete yet; a later pass decides
                    traces[identity] = trace
                    if trace:
                        continue
                # Seen under two names: renamed during this walk. The next pass has one name.
                found.setdefault(
                    identity,
                    Found(path, str(path.relative_to(self.root)), identity, info.st_size),
                )
        self._traces = traces  # files gone are forgotten
        return found

    def _trace_verdict(self, path: Path, identity: Identity) -> bool | None:
        """Whether a file named like a runtime trace is one (its first line is a trace record);
        None while its first line is incomplete. Decided once per file: lines are appended."""
        known = self._traces.get(identity)
        if known is not None:
            return known
        try:
            line = first_line(path, complete=True)
        except OSError:
            return False  # not a trace as far as can be told; reading it reports the error
        return None if line is None else is_trace_line(line)

    def _locate(self, file: Found, vanished: dict[Identity, Position]) -> Position:
        """The position this file continues from: its own, a vanished file's, or its start."""
        known = self.positions.get(file.identity)
        if known is not None:
            if known.path != file.relative:
                log.info("%s is now %s; its lines are not sent again", known.path, file.relative)
            return replace(known, path=file.relative, missing=0)
        adopted = _adopt(file, vanished)
        if adopted is not None:
            del vanished[adopted.identity]
            log.info(
                "%s holds what was read of %s; following it on from byte %d",
                file.relative,
                adopted.path,
                adopted.offset,
            )
            device, inode = file.identity
            return replace(adopted, path=file.relative, device=device, inode=inode, missing=0)
        device, inode = file.identity
        return Position(file.relative, device, inode, 0, _NOTHING_READ)

    def _read(
        self, file: Found, position: Position, budget: int
    ) -> tuple[Position, list[Record], bool]:
        """The records of the complete lines after `position`, the position after them, and
        whether the budget left complete lines unread."""
        try:
            handle = file.path.open("rb")
        except FileNotFoundError:
            return position, [], False
        except OSError as error:
            if file.path not in self._reported_unreadable:
                self._reported_unreadable.add(file.path)
                log.warning("cannot read %s, skipping it: %s", file.relative, error)
            return position, [], False
        with handle:
            info = os.fstat(handle.fileno())
            if (info.st_dev, info.st_ino) != file.identity:
                return position, [], False  # replaced since the scan; the next pass sees it
            if info.st_size == position.offset:
                return position, [], False
            if (
                info.st_size < position.offset
                or _fingerprint(handle, position.offset) != position.fingerprint
            ):
                log.warning(
                    "%s was truncated or rewritten; sending it again from the start",
                    file.relative,
                )
                position = replace(position, offset=0, fingerprint=_NOTHING_READ, session_id=None)
            data, cut = _complete_lines(handle, position.offset, info.st_size, budget)
            if not data:
                return position, [], False
            lines = _non_blank(data)
            if lines and position.session_id is None:
                position = replace(position, session_id=session_id_of(file.path, lines[0]))
            offset = position.offset + len(data)
            position = replace(position, offset=offset, fingerprint=_fingerprint(handle, offset))
        key, agent = position.session_id.encode(), _agent_of(file.path)
        if agent is None:
            return position, [(key, line) for line in lines], cut
        headers = (("openclaw-agent-id", agent.encode()),)  # as the store's sources name it
        return position, [(key, line, headers) for line in lines], cut


def _agent_of(path: Path) -> str | None:
    """`main` for <state>/agents/main/sessions/<id>.jsonl: a memory writer keeping a folder per
    agent needs it, and OpenClaw up to 2026.7 writes it nowhere else."""
    parts = path.absolute().parts
    if len(parts) >= 4 and parts[-2] == "sessions" and parts[-4] == "agents":
        return parts[-3]
    return None


def _is_followed(path: Path) -> bool:
    # A gzipped file is not appended to, and its offsets are not those of its lines.
    return is_session_file(path) and not path.name.endswith(".gz")


def _adopt(file: Found, vanished: dict[Identity, Position]) -> Position | None:
    """The vanished file's position that `file` continues: same session, same bytes up to it.

    Of several, the furthest read wins: all are then prefixes of this file.
    """
    if not vanished:
        return None
    try:
        with file.path.open("rb") as handle:
            session_id = session_id_of(file.path, _first_non_blank_line(handle))
            matches = [
                position
                for position in vanished.values()
                if position.session_id == session_id
                and position.offset <= file.size
                and _fingerprint(handle, position.offset) == position.fingerprint
            ]
    except OSError:
        return None
    return max(matches, key=lambda position: position.offset, default=None)


def _first_non_blank_line(handle: BinaryIO) -> bytes | None:
    handle.seek(0)
    for line in handle:
        body = line.rstrip(b"\r\n")
        if body.strip():
            return body
    return None


def _fingerprint(handle: BinaryIO, offset: int) -> str:
    """Identifies the first `offset` bytes of a file by their two ends, without reading them all.

    The head tells sessions apart (its header holds the session id and start time); the tail
    catches a rewrite of the part already read.
    """
    digest = _new_digest()
    handle.seek(0)
    digest.update(handle.read(min(offset, FINGERPRINT_BYTES)))
    if offset > FINGERPRINT_BYTES:
        handle.seek(offset - FINGERPRINT_BYTES)
        digest.update(handle.read(FINGERPRINT_BYTES))
    return digest.hexdigest()


def _complete_lines(handle: BinaryIO, offset: int, size: int, budget: int) -> tuple[bytes, bool]:
    """The bytes from `offset` through the last newline within `budget`, and whether the
    budget stopped the read short of `size` (more complete lines may follow).

    A line longer than the budget is read whole rather than split.
    """
    available = size - offset
    wanted = min(available, budget)
    handle.seek(offset)
    data = handle.read(wanted)
    end = data.rfind(b"\n") + 1
    if end == 0 and wanted < available:
        handle.seek(offset)
        data = handle.readline()
        end = len(data) if data.endswith(b"\n") else 0
    return data[:end], end > 0 and wanted < available


def _non_blank(data: bytes) -> list[bytes]:
    """The lines of `data` (which ends with a newline) without terminators, blank ones left out,
    as `stream.sources.session_files.open_lines` reads them."""
    lines = (line.rstrip(b"\r") for line in data.split(b"\n")[:-1])
    return [line for line in lines if line.strip()]


def _load(checkpoint: Path, origin: str) -> Positions:
    data = load_positions(checkpoint, KIND, origin)
    if data is None:
        return {}
    try:
        positions = [Position(**entry) for entry in data["files"]]
    except (KeyError, TypeError) as error:
        raise PositionsError(f"checkpoint {checkpoint} has a malformed entry: {error}") from error
    return {position.identity: position for position in positions}
