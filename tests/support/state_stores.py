"""The worker's table store over the fixture sessions (tests/support/state_format_fixture.py),
as the state-format tests and the older releases' readers write and continue it."""

from __future__ import annotations

from pathlib import Path

from stream.engine import Engine, Limits
from stream.settings import Settings
from stream.worker import codec
from stream.worker.processor import BatchProcessor, InRecord, ProcessedBatch
from stream.worker.tables import TableStore
from tests.support import state_format_fixture as fixture

FIXTURES = Path(__file__).parents[1] / "data" / "fixtures"
SETTINGS = Settings.load(environ={})


def new_store(tables: tuple[dict[bytes, bytes], dict[bytes, bytes]] | None = None,
              state_format: int = codec.STATE_FORMAT) -> TableStore:
    sessions, memory = tables if tables is not None else ({}, {})
    return TableStore(sessions, memory, fixture.SESSIONS_CHANGELOG, fixture.MEMORY_CHANGELOG,
                      state_format)


def process(store: TableStore, records: list[tuple[int, int, bytes, bytes]]) -> ProcessedBatch:
    processor = BatchProcessor(Engine(Limits(state_format=store.state_format)), store, SETTINGS)
    return processor.process(
        [InRecord(fixture.TOPIC, p, o, k, v) for p, o, k, v in records], fixture.NOW)


def store_after(parts: dict[str, list[bytes]],
                state_format: int = codec.STATE_FORMAT) -> TableStore:
    """A store that processed `parts` (session id: lines) from their start, in `state_format`."""
    store = new_store(state_format=state_format)
    process(store, fixture.records(parts))
    return store


def fixture_halves() -> tuple[dict[str, list[bytes]], dict[str, list[bytes]]]:
    """The fixture sessions' first parts and the rest of them, by session id."""
    whole = fixture.sessions(FIXTURES)
    first = {sid: fixture.split(lines)[0] for sid, lines in whole.items()}
    rest = {sid: fixture.split(lines)[1] for sid, lines in whole.items()}
    return first, rest


def after_the_first_part(first: dict[str, list[bytes]], rest: dict[str, list[bytes]]):
    """What follows the first part on the input: the rest of every session, then the first
    part again at new offsets (a source sending it again, as after a lost checkpoint)."""
    offsets = {p: 1 + max(o for q, o, _, _ in fixture.records(first) if q == p)
               for p in range(fixture.PARTITIONS)}
    later = fixture.records(rest, offsets)
    offsets = {p: 1 + max([o for q, o, _, _ in later if q == p] or [offsets[p] - 1])
               for p in range(fixture.PARTITIONS)}
    return later, fixture.records(first, offsets)
