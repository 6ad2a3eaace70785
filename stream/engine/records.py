"""What the engine emits: sources, alerts, dead letters and the verdict that carries them."""

from __future__ import annotations

import base64
import enum
import json
from dataclasses import dataclass
from typing import Final

import orjson

from stream.engine.text import digest64


class Action(enum.StrEnum):
    KEPT = "kept"
    DROPPED = "dropped"
    DEAD_LETTERED = "dead_lettered"


class Severity(enum.StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


# The engine makes a source, a verdict and a context per entry. Compiled, a dataclass's
# generated __init__ stays interpreted (a frozen one also sets each field through
# object.__setattr__), at four to seven times the cost of a written one: hence init=False.
# The sources are not frozen for the same reason; nothing hashes them.


# Origins are few (a file, a topic partition), so their digests are cached by what names them,
# in plain dicts emptied when full: no origin string is made and hashed per record.
_MAX_ORIGINS: Final = 4096
_FILE_ORIGINS: Final[dict[str, int]] = {}
_TOPIC_ORIGINS: Final[dict[str, dict[int, int]]] = {}


def _digest_of(origin: str) -> int:
    # a file's path may hold the surrogate escapes of bytes that are not UTF-8
    return digest64(origin.encode("utf-8", "surrogatepass"))


@dataclass(slots=True, init=False)
class FileOrigin:
    path: str
    line: int

    def __init__(self, path: str, line: int) -> None:
        self.path = path
        self.line = line

    @property
    def origin(self) -> str:
        return f"file:{self.path}"

    def origin_digest(self) -> int:
        """The digest of `origin`: what a session's state keeps of where it was read."""
        digest = _FILE_ORIGINS.get(self.path)
        if digest is None:
            if len(_FILE_ORIGINS) >= _MAX_ORIGINS:
                _FILE_ORIGINS.clear()
            digest = _FILE_ORIGINS[self.path] = _digest_of(self.origin)
        return digest

    @property
    def position(self) -> int:
        return self.line

    def as_json(self) -> dict:
        return {"file": self.path, "line": self.line}


@dataclass(slots=True, init=False)
class KafkaOrigin:
    topic: str
    partition: int
    offset: int

    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset

    @property
    def origin(self) -> str:
        return f"kafka:{self.topic}/{self.partition}"

    def origin_digest(self) -> int:
        """The digest of `origin`: what a session's state keeps of where it was read."""
        partitions = _TOPIC_ORIGINS.get(self.topic)
        if partitions is None:
            if len(_TOPIC_ORIGINS) >= _MAX_ORIGINS:
                _TOPIC_ORIGINS.clear()
            partitions = _TOPIC_ORIGINS[self.topic] = {}
        digest = partitions.get(self.partition)
        if digest is None:
            digest = partitions[self.partition] = _digest_of(self.origin)
        return digest

    @property
    def position(self) -> int:
        return self.offset

    def as_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset}


Origin = FileOrigin | KafkaOrigin


def dumps(value: dict) -> bytes:
    """orjson, except for text with lone surrogates (valid JSON escapes, not UTF-8): escaped."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def alert_id(session_id: str, kind: str, entry_id: str | None, discriminator: str) -> str:
    """Stable across runs, replays and adapters: the source is deliberately not part of it."""
    key = "\x00".join((session_id, kind, entry_id or "", discriminator))
    return f"{digest64(key.encode('utf-8', 'surrogatepass')):016x}"


@dataclass(frozen=True, slots=True)
class Alert:
    id: str
    kind: str
    severity: Severity
    session_id: str
    entry_id: str | None
    related_entry_id: str | None
    action: Action
    message: str
    evidence: dict
    source: Origin

    def as_json(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "severity": self.severity.value,
            "session_id": self.session_id,
            "entry_id": self.entry_id,
            "related_entry_id": self.related_entry_id,
            "action": self.action.value,
            "message": self.message,
            "evidence": self.evidence,
            "source": self.source.as_json(),
        }

    def to_bytes(self) -> bytes:
        return dumps(self.as_json())


@dataclass(frozen=True, slots=True)
class DeadLetter:
    session_id: str
    source: Origin
    reason: str
    raw: bytes

    def as_json(self) -> dict:
        # A line that is not UTF-8 cannot be a JSON string as it is: base64 keeps it exact.
        try:
            raw, encoding = self.raw.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            raw, encoding = base64.b64encode(self.raw).decode("ascii"), "base64"
        return {
            "session_id": self.session_id,
            "source": self.source.as_json(),
            "reason": self.reason,
            "raw": raw,
            "raw_encoding": encoding,
        }

    def to_bytes(self) -> bytes:
        return dumps(self.as_json())


@dataclass(slots=True, init=False)
class Verdict:
    """The fate of one input record: `output` is what goes to the clean stream when kept."""

    action: Action
    output: bytes | None
    alerts: list[Alert]
    dead_letter: DeadLetter | None
    drop_rule: str | None

    def __init__(
        self,
        action: Action,
        output: bytes | None = None,
        alerts: list[Alert] | None = None,
        dead_letter: DeadLetter | None = None,
        drop_rule: str | None = None,
    ) -> None:
        self.action = action
        self.output = output
        self.alerts = [] if alerts is None else alerts
        self.dead_letter = dead_letter
        self.drop_rule = drop_rule
