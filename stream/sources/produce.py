"""`session-stream produce`: publish session files to the input topic, one record per line.

Each non-blank line becomes one record, keyed by the session id and carrying the line byte for
byte (malformed lines too: the worker dead-letters them). Records of one session share a key,
hence a partition, and are sent in file order, so the worker sees every session in order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from stream.kafka.producer import send_records, start_idempotent_producer
from stream.settings import Settings
from stream.sources.session_files import (
    READ_ERRORS,
    find_session_files,
    open_lines,
    read_error_reason,
    session_id_of,
)


@dataclass
class ProduceReport:
    files: int = 0
    records: int = 0
    per_session: Counter[str] = field(default_factory=Counter)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)

    def summary(self, topic: str) -> str:
        text = (
            f"produced {self.records} records of {len(self.per_session)} sessions "
            f"from {self.files} files to {topic}"
        )
        if self.unreadable:
            text += f"; {len(self.unreadable)} unreadable"
        return text


def read_session(path: Path) -> tuple[str, list[bytes]]:
    """(session id, non-blank lines) of one file, read whole so a file that fails part-way
    is not half sent."""
    lines = [body for _, body in open_lines(path)]
    return session_id_of(path, lines[0] if lines else None), lines


async def produce_files(settings: Settings, paths: list[str]) -> ProduceReport:
    """Publish every session file under `paths` to the input topic.

    Unreadable files are listed in the report and skipped; broker errors raise KafkaError.
    """
    report = ProduceReport()
    producer = await start_idempotent_producer(settings)
    try:
        for given in map(Path, paths):
            for path in find_session_files(given):
                try:
                    session_id, lines = read_session(path)
                except READ_ERRORS as error:
                    report.unreadable.append((path, read_error_reason(error)))
                    continue
                key = session_id.encode("utf-8")
                sent = await send_records(
                    producer, settings.input_topic, ((key, line) for line in lines)
                )
                report.files += 1
                report.records += sent
                if sent:
                    report.per_session[session_id] += sent
    finally:
        await producer.stop()
    return report
