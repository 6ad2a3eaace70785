"""`session-stream memory-writer`: one markdown memory file per session, from the clean topic.

This is the reference for people who write memory writers. It consumes `session-events-clean`
(or, for the demo's comparison, the raw input topic) and appends the visible text of each
conversation turn to `OUT/<session>.md`:

    user: what changed?
    assistant: Two files. The first one
      continues here, indented by two spaces;

      an empty line inside a message stays empty.
    assistant (delivered): the text the gateway sent

One message is one *line* of the file: a `role: ` head line plus its continuation lines (every
line of the text after the first, indented by two spaces). Only user and assistant messages
with visible text are written. A transcript-only mirror (what the gateway delivered, not a
model reply) is written as `assistant (delivered): ...` when its text adds something, and left
out when the file already holds that text. Tool results, custom entries and every other entry
type are not written.

Delivery is at least once: offsets are committed only after the files are durable, so after a
crash, a rebalance or a broker that went away records come again. While the broker is away the
writer keeps asking for records and retries its commit (`stream.kafka.retry`); it goes on by
itself when the broker is back. Writing is idempotent on (session id, entry id): beside
each markdown file, `OUT/.index/<session>.ids` lists the entries already written, each with the
size the markdown file had after it. That index is the commit record of the markdown file: the
markdown is appended and fsynced first, the index second, and on load anything in the markdown
beyond the last indexed size (an append whose index line never made it) is cut off, so the
redelivered records write it again, exactly once.

`--compare RAW_DIR CLEAN_DIR` prints, per session, how many lines of each directory repeat an
earlier line of the same file verbatim: the same sessions written from the raw topic and from
the clean topic.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

from stream.engine.entry import Entry, MalformedEntry, parse
from stream.engine.text import digest64, normalize
from stream.kafka.consumer import (
    TopicMissing,
    cannot_read,
    caught_up,
    make_consumer,
    topic_partitions,
)
from stream.kafka.retry import Backoff, curable, quiet_client_logs, until_done
from stream.settings import Settings, add_options

INDEX_DIR = ".index"
USER, ASSISTANT, DELIVERED = "user", "assistant", "assistant (delivered)"
INDENT = "  "
CACHED_SESSIONS = 1000  # sessions whose ids and texts stay in memory between batches
POLL_MS = 500
IDLE_TIMEOUT = 5.0  # --once: stop after this long without a record, should the end never show
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")

log = logging.getLogger(__name__)


# --- rendering: one entry -> one markdown line -------------------------------------------------


def render(entry: Entry, written: list[str]) -> str | None:
    """The markdown line of `entry` (ending in a newline), or None when it is not written.

    `written` holds the normalized texts of the session's lines so far; a mirror whose text is
    already in one of them repeats what the memory holds and is left out.
    """
    if entry.role == USER:
        label = USER
    elif entry.role == ASSISTANT:
        label = DELIVERED if entry.is_mirror else ASSISTANT
    else:
        return None  # toolResult, custom, session header, model changes, ...
    text = entry.visible_text.strip()
    if not text:
        return None  # tool calls only, an error or an abort: nothing was said
    if label == DELIVERED and _repeats(entry.normalized_text, written):
        return None
    first, *rest = text.splitlines()
    # Continuation lines are indented so that every line that starts a message starts with
    # its role. Trailing whitespace is dropped: invisible, and a hard break to markdown.
    lines = [f"{label}: {first.rstrip()}"]
    lines += [INDENT + line.rstrip() if line.strip() else "" for line in rest]
    return "\n".join(lines) + "\n"


def _repeats(text: str, written: list[str]) -> bool:
    """`text` occurs, as whole words, in an earlier line: a delivered copy or a chunk of it.

    The comparison is on normalized text (whitespace collapsed, reply directives gone), the
    engine's own notion of "the same words".
    """
    needle = f" {text} "
    return any(needle in f" {earlier} " for earlier in written)


def split_lines(markdown: str) -> list[str]:
    """The lines (messages) of a memory file: each head line with its continuation lines."""
    lines: list[str] = []
    for physical in markdown.split("\n"):
        if physical and not physical[0].isspace():
            lines.append(physical)
        elif lines:
            lines[-1] += "\n" + physical
    return [line.rstrip("\n") for line in lines]


def line_text(line: str) -> str:
    """The normalized text of one line, without its `role: ` label."""
    return normalize(line.partition(": ")[2])


def file_name(session_id: str) -> str:
    """A safe file name for a session id; ids that had to change get a hash against clashes."""
    safe = _UNSAFE.sub("_", session_id)[:100]
    if safe and safe == session_id and not safe.startswith("."):
        return safe
    return f"_{safe}-{digest64(session_id.encode('utf-8', 'surrogatepass')):016x}"


# --- durable, idempotent files -----------------------------------------------------------------


class SessionMemory:
    """One session's markdown file and its index, loaded once and appended in batches."""

    def __init__(self, markdown: Path, index: Path) -> None:
        self.markdown, self.index = markdown, index
        self.ids: set[str] = set()
        self.size = 0  # size of the markdown file after the last indexed line
        self._load_index()
        self._recover_markdown()
        self.texts = [line_text(line) for line in split_lines(self._read_markdown())]
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

    def _read_markdown(self) -> str:
        data = self.markdown.read_bytes() if self.markdown.exists() else b""
        return data.decode("utf-8", "replace")

    def add(self, entry: Entry) -> None:
        if entry.id is None or entry.id in self.ids:
            return  # written before: this is a redelivery
        line = render(entry, self.texts)
        if line is None:
            return  # nothing to remember: no need to index it, rendering it again skips it too
        data = line.encode("utf-8", "replace")  # lone surrogates cannot be UTF-8: "?"
        self.ids.add(entry.id)
        self.texts.append(line_text(data.decode("utf-8")))
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


# --- the consumer ------------------------------------------------------------------------------


@dataclass
class RunStats:
    records: int = 0
    lines: int = 0


class _ForgetOnRevoke(ConsumerRebalanceListener):
    """Partitions (so sessions) may move to another writer sharing the directory: reload them
    from disk when they come back. The eager rebalance revokes before anyone is assigned, and
    this writer writes between polls only, so two writers never append to one session at once.
    """

    def __init__(self, writer: MemoryWriter) -> None:
        self.writer = writer

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.writer.forget()

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        pass


async def consume(
    settings: Settings,
    topic: str,
    writer: MemoryWriter,
    group: str,
    *,
    follow: bool,
    idle_timeout: float = IDLE_TIMEOUT,
) -> RunStats:
    """Write the records of `topic` as a member of consumer group `group`.

    Without `follow`, returns once every assigned partition is read to its end. A group that
    has no committed offsets starts at the oldest record.
    """
    # Offsets are committed here, after the files are durable.
    consumer = make_consumer(settings, group, auto_offset_reset="earliest")
    stats = RunStats()
    try:
        await consumer.start()
        await topic_partitions(consumer, [topic], wait=follow)
        consumer.subscribe([topic], listener=_ForgetOnRevoke(writer))
        loop = asyncio.get_running_loop()
        idle_since: float | None = None
        backoff = Backoff()
        while True:
            try:
                batches = await consumer.getmany(timeout_ms=POLL_MS)
            except KafkaError as error:
                # Nothing was written or committed for these: they come again.
                if not curable(error):
                    raise
                delay = backoff.next()
                log.warning("fetching from %s failed (%s); retrying in %.1fs",
                            settings.bootstrap, error, delay)
                await asyncio.sleep(delay)
                continue
            backoff.reset()
            if batches:
                stats.records += sum(map(len, batches.values()))
                # A session's records share a key, hence a partition, and come in order.
                stats.lines += writer.write(
                    (record.key.decode("utf-8", "replace"), record.value)
                    for records in batches.values()
                    for record in records
                    if record.key is not None and record.value is not None
                )
                # Only now, with the lines durable, may the group forget these records.
                offsets = {tp: rs[-1].offset + 1 for tp, rs in batches.items()}
                await until_done(lambda: _commit(consumer, offsets),  # noqa: B023 - awaited
                                 "committing the memory writer's offsets",
                                 broker=settings.bootstrap)
                idle_since = loop.time()
            elif follow:
                continue
            elif not consumer.assignment():
                idle_since = None  # still joining the group, which can take seconds
            elif idle_since is None:
                idle_since = loop.time()
            elif (await caught_up(consumer, consumer.assignment())
                  or loop.time() - idle_since >= idle_timeout):
                return stats
    finally:
        await consumer.stop()


async def _commit(consumer: AIOKafkaConsumer, offsets: dict[TopicPartition, int]) -> None:
    # CommitFailedError: a rebalance took the partitions first; their new owner reads these
    # records again, which the index makes harmless.
    with contextlib.suppress(CommitFailedError):
        await consumer.commit(offsets)


# --- the demo's proof: duplicate lines, raw vs clean --------------------------------------------


def duplicate_lines(directory: Path) -> dict[str, tuple[int, int]]:
    """Per memory file (session file name): (lines, lines repeating an earlier one verbatim)."""
    counts = {}
    for path in sorted(Path(directory).glob("*.md")):
        lines = split_lines(path.read_bytes().decode("utf-8", "replace"))
        seen = Counter(lines)
        counts[path.stem] = (len(lines), sum(n - 1 for n in seen.values()))
    return counts


def duplicate_line_report(dir_raw: Path, dir_clean: Path) -> dict:
    """Lines and duplicate lines per session and in total, of the same sessions written from
    the raw topic and from the clean topic:

    {"sessions": {name: {"raw_lines", "raw_duplicates", "clean_lines", "clean_duplicates"}},
     "total": {the same four keys}}
    """
    raw, clean = duplicate_lines(Path(dir_raw)), duplicate_lines(Path(dir_clean))
    sessions = {}
    for name in sorted(raw.keys() | clean.keys()):
        raw_lines, raw_dups = raw.get(name, (0, 0))
        clean_lines, clean_dups = clean.get(name, (0, 0))
        sessions[name] = {
            "raw_lines": raw_lines,
            "raw_duplicates": raw_dups,
            "clean_lines": clean_lines,
            "clean_duplicates": clean_dups,
        }
    keys = ("raw_lines", "raw_duplicates", "clean_lines", "clean_duplicates")
    total = {key: sum(counts[key] for counts in sessions.values()) for key in keys}
    return {"sessions": sessions, "total": total}


def format_report(report: dict) -> str:
    """The report as a plain-text table, a row per session and one for the total."""
    rows = [("session", "raw lines", "raw duplicates", "clean lines", "clean duplicates")]
    for name, counts in [*report["sessions"].items(), ("total", report["total"])]:
        rows.append((name, *(str(value) for value in counts.values())))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    )


# --- command line ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", metavar="DIR", help="directory of the memory files")
    mode.add_argument(
        "--compare",
        nargs=2,
        metavar=("RAW_DIR", "CLEAN_DIR"),
        help="print the duplicate lines of two memory directories side by side, then exit",
    )
    parser.add_argument(
        "--topic",
        choices=("clean", "input"),
        default="clean",
        help="read the clean topic (default) or the raw input topic (for the comparison)",
    )
    parser.add_argument(
        "--once", action="store_true", help="stop at the end of the topic instead of following it"
    )
    parser.add_argument(
        "--group",
        help="consumer group (default: <app-id>-memory-writer); its committed offsets say where "
        "to resume, so a new --out directory wants a new group",
    )
    add_options(parser, ("broker", "app_id", "input_topic", "clean_topic", "session_timeout"))


def main(
    args: argparse.Namespace, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Exit 0 at the end (--once) or on Ctrl-C, 1 when the broker or the topic is not there."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    if args.compare:
        print(format_report(duplicate_line_report(*map(Path, args.compare))), file=stdout)
        return 0
    logging.basicConfig(level=logging.WARNING,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    quiet_client_logs()
    settings = Settings.load(args)
    topic = settings.clean_topic if args.topic == "clean" else settings.input_topic
    group = args.group or f"{settings.app_id}-memory-writer"
    writer = MemoryWriter(Path(args.out))
    try:
        stats = asyncio.run(consume(settings, topic, writer, group, follow=not args.once))
    except KeyboardInterrupt:
        return 0
    except (KafkaError, TopicMissing) as error:
        print(cannot_read(settings, topic, error), file=stderr)
        return 1
    print(
        f"session-stream: {stats.lines} lines from {stats.records} records of {topic} "
        f"written to {args.out}",
        file=stderr,
    )
    return 0
