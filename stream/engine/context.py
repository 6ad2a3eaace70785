"""The view of one entry in its session that every rule receives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from stream.engine.entry import Entry
from stream.engine.kinds import SESSION, AlertKind
from stream.engine.records import Alert, Origin, alert_id
from stream.engine.state import START_SEEN, Session, SessionState
from stream.engine.stored import IDENTITY_INDEX_FORMAT, STATE_FORMAT
from stream.engine.text import normalized_prefix

if TYPE_CHECKING:
    from stream.engine.rules.identities import IdentityUse
    from stream.engine.rules.keys import KeyUse

DEFAULT_MAX_IDS: Final = 10_000


@dataclass(frozen=True, slots=True)
class Limits:
    # How many recent entries' ids, idempotency keys and tool calls a session remembers.
    max_ids: int = DEFAULT_MAX_IDS
    # Open tool calls remembered per turn for `orphaned_tool_call`.
    max_pending_calls: int = 64
    # Shortest unit that `repetition_cascade` counts as a repeated reply.
    min_repetition_unit: int = 20
    # Alerts carry no message text unless an operator opts in: then the first this many
    # characters of the entry's normalized text, as `evidence.snippet`.
    snippet_chars: int = 0
    # The heartbeat prompt OpenClaw is configured with, "" for the pinned releases' defaults:
    # a user message with it opens a heartbeat turn (`silent_turn_replay`) when it carries no
    # provenance.
    heartbeat_prompt: str = ""
    # The state format the session's state is stored in: a worker writing an earlier format
    # during a rolling upgrade (`--upgrade-from`) remembers nothing that format lacks, so a
    # worker of the release that wrote it reads it as its own.
    state_format: int = STATE_FORMAT


@dataclass(slots=True, init=False)
class Context:
    session: Session
    entry: Entry
    source: Origin
    source_hash: int
    limits: Limits
    alerts: list[Alert]
    parent_read: bool
    parent_value: list | None
    # the kept entry it hangs below in the output, and the entry it may be a copy of: read once
    output_read: bool
    output_id: str | None
    output_value: list | None
    original_read: bool
    original_id: str | None
    # what the message's idempotency key and identities leave behind once the message is kept
    key_use: KeyUse | None
    identity_use: IdentityUse | None

    def __init__(
        self, session: Session, entry: Entry, source: Origin, source_hash: int, limits: Limits
    ) -> None:
        # Written out rather than generated: see records.FileOrigin.
        self.session = session
        self.entry = entry
        self.source = source
        self.source_hash = source_hash
        self.limits = limits
        self.alerts = []
        self.parent_read = False
        self.parent_value = None
        self.output_read = False
        self.output_id = None
        self.output_value = None
        self.original_read = False
        self.original_id = None
        self.key_use = None
        self.identity_use = None

    @property
    def state(self) -> SessionState:
        return self.session.state

    @property
    def indexes_identities(self) -> bool:
        """The identity index and what else state format 4 added are kept."""
        return self.limits.state_format >= IDENTITY_INDEX_FORMAT

    @property
    def sure_of_history(self) -> bool:
        """Seen from the session's start and nothing forgotten: only then is absence a fact."""
        return self.state.start == START_SEEN and self.state.seq <= self.limits.max_ids

    def recall(self, key: str) -> list | None:
        value = self.session.memory.get(key)
        if value is None or value[0] <= self.state.seq - self.limits.max_ids:
            return None
        return value

    def parent_record(self) -> list | None:
        """The remembered record of the entry's parent, read once: several rules ask."""
        if not self.parent_read:
            key = self.entry.parent_key
            self.parent_value = self.recall(key) if key else None
            self.parent_read = True
        return self.parent_value

    def remember(self, key: str, values: list) -> None:
        """Store `values` under `key`, the current seq first (in place: a function of
        variable arguments is a Python call, compiled or not)."""
        values.insert(0, self.state.seq)
        self.session.memory.put(key, values)

    def _with_snippet(self, evidence: dict, entry_id: str | None) -> dict:
        length = self.limits.snippet_chars
        if length <= 0 or entry_id != self.entry.id:
            return evidence
        text = normalized_prefix(self.entry.visible_text, length)
        return {**evidence, "snippet": text} if text else evidence

    def alert(
        self,
        kind: AlertKind,
        message: str,
        *,
        evidence: dict | None = None,
        related: str | None = None,
        discriminator: str = "",
        entry_id: str | None = None,
        escalated: bool = False,
    ) -> Alert:
        """An alert of a registered kind about this entry, or another one (`entry_id`); one
        about the session names no entry (its `related` is the entry that raised it), so an
        entry that is also dropped carries no second alert, and alerts with action "dropped"
        count the drops. `escalated`: the kind's second severity applies."""
        entry_id = None if kind.about == SESSION else entry_id or self.entry.id
        made = Alert(
            id=alert_id(
                self.session.id,
                kind.name,
                entry_id or self.entry.id,
                discriminator or f"{self.entry.fingerprint:x}",
            ),
            kind=kind.name,
            severity=kind.severity_of(escalated),
            session_id=self.session.id,
            entry_id=entry_id,
            related_entry_id=related,
            action=kind.action,
            message=message,
            evidence=self._with_snippet(evidence or {}, entry_id),
            source=self.source,
        )
        self.alerts.append(made)
        return made
