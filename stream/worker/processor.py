"""The worker's core without Kafka: a batch of input records in, what must leave out.

`process` runs the engine over a batch, then writes the state of every session it touched
back to the table store in one transaction, and returns both the batch's output records and
that transaction's changelog records. Committing them (the order, and why) is
`stream.worker.commit`'s.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from stream.engine import DeadLetter, Engine, KafkaOrigin, Memory, Session, SessionState, Verdict
from stream.engine.engine import dead_letter_verdict
from stream.engine.tally import Tally
from stream.settings import Settings
from stream.worker.tables import ChangelogRecord, StoredSession, TableStore, TableTransaction

log = logging.getLogger(__name__)

SESSION_HEADERS = "openclaw-"


class Incoming(Protocol):
    """An input record as the processor reads it: a Faust message is one."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> object: ...


@dataclass(slots=True)
class InRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: float | None = None
    headers: Any = None  # (name, value) pairs or a mapping, as a Faust message has them


@dataclass(slots=True, init=False)
class OutRecord:
    topic: str
    partition: int
    key: bytes | None
    value: bytes
    source: KafkaOrigin
    headers: list[tuple[str, bytes]] | None

    def __init__(self, topic: str, partition: int, key: bytes | None, value: bytes,
                 source: KafkaOrigin, *, headers: list[tuple[str, bytes]] | None = None,
                 ) -> None:
        # Written out, one per output: compiled, a generated __init__ stays interpreted (see
        # stream.engine.records).
        self.topic = topic
        self.partition = partition
        self.key = key
        self.value = value
        self.source = source
        self.headers = headers


class BatchMemory(Memory):
    """A session's memory during one batch. While the session's stored value holds it
    (`inline`), reads and writes go to the copy the batch decoded, which it stores whole;
    else reads go through to the memory table, and `writes` buffers the batch's values."""

    __slots__ = ("_session_id", "_store", "inline", "writes")

    def __init__(self, store: TableStore, session_id: str,
                 inline: dict[str, list] | None) -> None:
        self._store = store
        self._session_id = session_id
        self.inline = inline is not None
        self.writes: dict[str, list] = inline if inline is not None else {}

    def get(self, key: str) -> list | None:
        value = self.writes.get(key)
        if value is not None or self.inline:
            return value
        return self._store.recall(self._session_id, key)

    def put(self, key: str, value: list) -> None:
        self.writes[key] = value


@dataclass(slots=True)
class _Open:
    session: Session
    memory: BatchMemory
    partition: int


@dataclass(slots=True)
class ProcessedBatch:
    """What a batch leaves behind for its commit (stream.worker.commit): its outputs and the
    changelog of the state they came from."""

    outputs: list[OutRecord]
    changelog: list[ChangelogRecord]
    forgotten: int = 0  # idle sessions forgotten by this batch's sweep


@dataclass
class BatchProcessor:
    engine: Engine
    store: TableStore
    settings: Settings
    tally: Tally = field(default_factory=Tally)
    outputs_by_topic: Counter[str] = field(default_factory=Counter)
    # the next offset to process, per input partition: what lag is measured against
    positions: dict[int, int] = field(default_factory=dict)
    _open: dict[str, _Open] = field(default_factory=dict)

    def process(self, records: Iterable[Incoming], now: float, owned: set[int] | None = None,
                sweep: bool = False) -> ProcessedBatch:
        """Run the engine over `records` and write back the state of every session they
        touched; with `sweep`, also forget the sessions idle longer than the TTL.

        Sessions of partitions this worker no longer `owned` (a rebalance took them while
        the batch was fetched) are not written: their new owner processes those records
        again from the committed offset, and a late write from here could land after its
        own in the changelog and take a session's state back in time. Only the owner of a
        partition forgets its sessions: a standby copy may be older than the owner's.
        """
        outputs: list[OutRecord] = []
        for record in records:
            source = KafkaOrigin(record.topic, record.partition, record.offset)
            session_id, problem = _session_id(record.key)
            if problem is not None or record.value is None:
                verdict = dead_letter_verdict(
                    session_id, record.value or b"", source, problem or "record has no value"
                )
            else:
                opened = self._session(session_id, record.partition)
                verdict = self.engine.process(opened.session, record.value, source)
            self.tally.add(verdict)
            outputs += self._outputs(source, record.key, verdict, record.headers)
            self.positions[record.partition] = record.offset + 1
        self.outputs_by_topic.update(out.topic for out in outputs)
        transaction = self.store.transaction()
        for session_id, opened in self._open.items():
            if owned is None or opened.partition in owned:
                memory = opened.memory
                stored = StoredSession(opened.session.state, now, opened.partition,
                                       memory.writes if memory.inline else None)
                transaction.save(session_id, stored, memory.writes)
        self._open.clear()
        forgotten = self._forget_idle(transaction, now, owned) if sweep else 0
        return ProcessedBatch(outputs, transaction.close(), forgotten)

    def _forget_idle(self, transaction: TableTransaction, now: float,
                     owned: set[int] | None) -> int:
        cutoff = now - self.settings.session_ttl
        idle = {
            sid: partition
            for sid, touched, partition in self.store.sessions()
            if touched < cutoff and (owned is None or partition in owned)
        }
        return transaction.forget(idle) if idle else 0

    def _session(self, session_id: str, partition: int) -> _Open:
        opened = self._open.get(session_id)
        if opened is None:
            state, inline = self._stored(session_id)
            memory = BatchMemory(self.store, session_id, inline)
            opened = _Open(Session(session_id, state, memory), memory, partition)
            self._open[session_id] = opened
        return opened

    def _stored(self, session_id: str) -> tuple[SessionState, dict[str, list] | None]:
        """The session's state, and its memory when its stored value holds it, as a new
        session's does. The memory table holds values of a session without a state only when
        the changelog of the batch that moved them there landed in part: that batch is then
        processed again as the first time, without them, and moves them again."""
        try:
            stored = self.store.load(session_id)
        except (ValueError, TypeError) as error:
            # A value this version cannot read: start over, as for a session seen mid-way,
            # where every rule that needs history stays silent.
            log.warning("unreadable state of a session (%s); starting it afresh",
                        type(error).__name__)
            return SessionState(), None  # what the memory table holds of it is still read
        if stored is None:
            return SessionState(), {}
        return stored.state, stored.memory

    def _outputs(self, source: KafkaOrigin, key: bytes | None, verdict: Verdict,
                 headers: object) -> Iterator[OutRecord]:
        settings = self.settings
        partition = source.partition
        if verdict.output is not None:
            yield OutRecord(settings.clean_topic, partition, key, verdict.output, source,
                            headers=_session_headers(headers))
        for alert in verdict.alerts:
            yield OutRecord(settings.alerts_topic, partition, key, alert.to_bytes(), source)
        letter = verdict.dead_letter
        if letter is not None:
            yield dead_letter_record(settings.dlq_topic, partition, key, letter, source)


def dead_letter_record(dlq_topic: str, partition: int, key: bytes | None, letter: DeadLetter,
                       source: KafkaOrigin, *, raw_omitted: bool = False) -> OutRecord:
    """The record of a dead letter, with the reason and source headers consumers filter on;
    `raw_omitted` for a letter that stands in for bytes too large to send."""
    if raw_omitted:
        value = orjson.dumps({**letter.as_json(), "raw_encoding": "omitted"})
    else:
        value = letter.to_bytes()
    headers = [("reason", letter.reason.encode()), ("source", source_header(source))]
    return OutRecord(dlq_topic, partition, key, value, source, headers=headers)


def source_header(source: KafkaOrigin) -> bytes:
    return f"{source.topic}/{source.partition}/{source.offset}".encode()


def _session_headers(headers: object) -> list[tuple[str, bytes]] | None:
    """The input record's `openclaw-*` headers (what the source knew of the session: agent,
    key, the session it follows and why), for the clean record: a memory writer reads them."""
    if isinstance(headers, dict):
        pairs: list = list(headers.items())
    elif isinstance(headers, (list, tuple)):
        pairs = list(headers)
    else:
        return None
    kept: list[tuple[str, bytes]] = []
    for pair in pairs:
        if isinstance(pair, tuple) and len(pair) == 2:
            name, value = pair
            if (isinstance(name, str) and name.startswith(SESSION_HEADERS)
                    and isinstance(value, bytes)):
                kept.append((name, value))
    return kept or None


def _session_id(key: bytes | None) -> tuple[str, str | None]:
    if key is None:
        return "", "record has no key (the session id)"
    try:
        session_id = key.decode("utf-8")
    except UnicodeDecodeError:
        return key.decode("utf-8", "backslashreplace"), "key is not UTF-8"
    if not session_id:
        return "", "record has an empty key (the session id)"
    return session_id, None
