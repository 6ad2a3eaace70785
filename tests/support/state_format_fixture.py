"""The input of tests/data/state-format-*, and the program that writes a version's state of it.

`records()` lays the fixture sessions (tests/data/fixtures) out as input records: one session
per file, on partition 0 or 1, each file's first `FIRST_PART` of its lines. Run as a program
under a checkout of an older commit, it processes those records with that commit's worker
code and writes the changelog records the commit produced (tests/data/README.md says how):

    git worktree add /tmp/format-1 <commit>
    cd /tmp/format-1 && SESSION_STREAM_PURE_PYTHON=1 PYTHONPATH=/tmp/format-1 \\
        <venv>/bin/python <this file> <fixtures dir> <out dir>

It imports only what every commit since the table store (f1d98e4) has: TableStore, the batch
processor and InRecord.
"""

from __future__ import annotations

import base64
import sys
import zlib
from pathlib import Path

import orjson

TOPIC = "session-events"
PARTITIONS = 2
FIRST_PART = 0.5
# The batch's clock: touched times in the state come from it, so the bytes are reproducible.
NOW = 1_780_000_000.0
SESSIONS_CHANGELOG = "session-stream-sessions-changelog"
MEMORY_CHANGELOG = "session-stream-memory-changelog"


def sessions(fixtures: Path) -> dict[str, list[bytes]]:
    """Each fixture session file's lines, by a session id made of its name."""
    found = {}
    for path in sorted(fixtures.iterdir()):
        if ".jsonl" in path.name and path.is_file():
            lines = [line for line in path.read_bytes().splitlines() if line.strip()]
            name = path.name.split(".", 1)[0]
            found[f"{name}-{zlib.crc32(path.name.encode()):08x}"] = lines
    return found


def partition_of(session_id: str) -> int:
    return zlib.crc32(session_id.encode()) % PARTITIONS


def split(lines: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    cut = int(len(lines) * FIRST_PART)
    return lines[:cut], lines[cut:]


def records(parts: dict[str, list[bytes]], first_offsets: dict[int, int] | None = None,
            ) -> list[tuple[int, int, bytes, bytes]]:
    """(partition, offset, key, value) for the sessions' lines, interleaved round robin, with
    offsets per partition from `first_offsets` (0)."""
    offsets = dict(first_offsets or {})
    out = []
    queues = {sid: list(lines) for sid, lines in parts.items()}
    while any(queues.values()):
        for sid, queue in queues.items():
            if queue:
                partition = partition_of(sid)
                offset = offsets.get(partition, 0)
                offsets[partition] = offset + 1
                out.append((partition, offset, sid.encode(), queue.pop(0)))
    return out


def write_changelog(changelog: list, path: Path) -> None:
    """One JSON line per changelog record, in write order: table, partition, key, value
    (base64; null for a tombstone)."""
    with path.open("wb") as out:
        for record in changelog:
            table = "sessions" if record.topic == SESSIONS_CHANGELOG else "memory"
            value = None if record.value is None else base64.b64encode(record.value).decode()
            out.write(orjson.dumps({"table": table, "partition": record.partition,
                                    "key": base64.b64encode(record.key).decode(),
                                    "value": value}) + b"\n")


def decoded(record: dict) -> tuple[bytes, bytes | None]:
    """A changelog line's key and value."""
    value = record["value"]
    return base64.b64decode(record["key"]), None if value is None else base64.b64decode(value)


def read_changelog(path: Path) -> tuple[dict[bytes, bytes], dict[bytes, bytes]]:
    """The two tables the changelog at `path` restores, as recovery applies it."""
    tables: dict[str, dict[bytes, bytes]] = {"sessions": {}, "memory": {}}
    for line in path.read_bytes().splitlines():
        record = orjson.loads(line)
        table = tables[record["table"]]
        key, value = decoded(record)
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return tables["sessions"], tables["memory"]


def main(fixtures: Path, out: Path) -> None:
    from stream.engine import Engine
    from stream.settings import Settings
    from stream.worker.processor import BatchProcessor, InRecord
    from stream.worker.tables import TableStore

    store = TableStore({}, {}, SESSIONS_CHANGELOG, MEMORY_CHANGELOG)
    processor = BatchProcessor(Engine(), store, Settings.load(environ={}))
    first = {sid: split(lines)[0] for sid, lines in sessions(fixtures).items()}
    batch = processor.process(
        [InRecord(TOPIC, p, o, k, v) for p, o, k, v in records(first)], NOW)
    out.mkdir(parents=True, exist_ok=True)
    write_changelog(batch.changelog, out / "changelog.jsonl")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
