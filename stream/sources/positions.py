"""The live sources' positions: where each source got to, saved after the broker acked, in the
file its `--checkpoint` option names (not the worker's commit checkpoint, stream.worker.checkpoint).

A positions file is one JSON object naming its format (`"version"`: POSITIONS_FORMAT), its
source kind and origin (the folder or database it belongs to), replaced atomically: a crash
leaves either the old or the new file, never half of one, so a restart neither loses nor
re-sends records.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import orjson

from stream.durable import fsync_folder
from stream.formats import FormatTooNew

# Format 1 is the only one yet, since the first live sources (CHANGELOG.md). A newer one stops
# the source (FormatTooNew): positions it cannot read would re-send or skip records.
POSITIONS_FORMAT = 1

log = logging.getLogger(__name__)


class PositionsError(ValueError):
    """A checkpoint that cannot be used: unreadable, malformed, or another source's."""


def load_positions(path: Path, kind: str, origin: str) -> dict[str, Any] | None:
    """The checkpoint's content, or None when there is none yet, which is logged in one line:
    a source started from another folder than before, with a relative --checkpoint, sends
    everything again, and that must not go unsaid.

    A checkpoint of another kind or origin is refused rather than reused: positions of one
    folder or database mean nothing in another, and starting over would re-send everything.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        log.warning("no checkpoint at %s: %s starts from the beginning of %s (what was sent "
                    "before is sent again; the worker drops it as redeliveries)",
                    path.absolute(), kind, origin)
        return None
    except OSError as error:
        raise PositionsError(f"cannot read checkpoint {path}: {error}") from error
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise PositionsError(f"checkpoint {path} is not JSON: {error}") from error
    found = data.get("version") if isinstance(data, dict) else None
    if isinstance(found, int) and not isinstance(found, bool) and found > POSITIONS_FORMAT:
        raise FormatTooNew("positions", f"checkpoint {path}", found, POSITIONS_FORMAT)
    if not isinstance(data, dict) or found != POSITIONS_FORMAT or data.get("kind") != kind:
        raise PositionsError(f"{path} is not a format {POSITIONS_FORMAT} {kind} checkpoint")
    if data.get("origin") != origin:
        raise PositionsError(
            f"checkpoint {path} belongs to {data.get('origin')!r}, not {origin!r}; "
            "give another --checkpoint (or edit its origin if the data moved)"
        )
    return data


def save_positions(path: Path, kind: str, origin: str, content: dict[str, Any]) -> None:
    """Write the checkpoint durably: a temporary file, fsynced, renamed over the old one."""
    data = {"version": POSITIONS_FORMAT, "kind": kind, "origin": origin, **content}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("wb") as handle:
            handle.write(orjson.dumps(data, option=orjson.OPT_INDENT_2))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)


class PositionsWriter:
    """Saves checkpoints on a thread of its own, the latest one first, so that a slow fsync
    (tens to hundreds of ms on a busy disk) does not hold up the next read and send.

    `save()` hands over a content and returns at once; a content handed over while a write is
    in progress replaces any that waits, since only the newest position matters. A crash loses
    at most the writes not yet done: records acknowledged but not checkpointed are sent again
    on restart, as they are when a crash comes between the acknowledgement and a synchronous
    save. `close()` writes what waits and raises what a write raised.
    """

    def __init__(self, path: Path, kind: str, origin: str) -> None:
        self.path = path
        self.kind = kind
        self.origin = origin
        self._waiting: dict[str, Any] | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="checkpoint", daemon=True)
        self._thread.start()

    def save(self, content: dict[str, Any]) -> None:
        with self._wake:
            self._raise()
            self._waiting = content
            self._wake.notify()

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join()
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._waiting is None and not self._closed:
                    self._wake.wait()
                content, self._waiting = self._waiting, None
                if content is None:
                    return
            try:
                save_positions(self.path, self.kind, self.origin, content)
            except OSError as error:
                with self._wake:
                    self._error = error
                return
