"""Rules 1-2a: an entry seen before under its id, or a message under its idempotency key."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from stream.engine.context import Context
from stream.engine.entry import Entry, positional_scope, record_key
from stream.engine.records import Severity
from stream.engine.rules.drops import Drop, DropRule
from stream.engine.text import digest64

REDELIVERY: Final[DropRule] = DropRule(
    "redelivery",
    Severity.INFO,
    "same id and same bytes as entry",
    lambda entry: {"fingerprint": f"{entry.fingerprint:016x}"},
)
IDEMPOTENT_REPLAY: Final[DropRule] = DropRule(
    "idempotent_replay",
    Severity.INFO,
    "same idempotency identity and content as entry",
    lambda entry: {
        "idempotency_key": entry.idempotency_key,
        "positional": positional_scope(entry.idempotency_key or "") is not None,
    },
)
ANNOUNCE_RETRY_DUPLICATE: Final[DropRule] = DropRule(
    "announce_retry_duplicate",
    Severity.INFO,
    "retried delivery of the same announce repeats entry",
    lambda entry: {"idempotency_key": entry.idempotency_key},
)

# OpenClaw's subagent announces and settle wakes (`buildRequesterSettleWakeIdentity`): a retry
# of the same delivery appends `:retry-N` to the first attempt's key.
_ANNOUNCE_RETRY: Final = re.compile(r"^(?P<base>announce:.+):retry-[1-9][0-9]*$")

# Memory values: "e:<id>" -> [seq, fingerprint, source hash, drop rule, related id, kept
# ancestor, first kept child], and for a kept final model reply (no tool calls) with text a
# mirror would repeat, its `reply_text_hash` last. A dropped entry's related id is the entry it
# repeats, and its kept ancestor where what hangs below it goes; a kept entry's related id is
# the entry it stands beside (the first child of the entry it hangs below, or of what that one
# stands for), whose copy its own children may be; "k:<key>" -> [seq, content fingerprint,
# entry id]; "i:<scope>\0<role>\0<fingerprint>" -> [seq, entry id]; "v:<id>\0<fingerprint>" ->
# [seq, source hash] for each conflicting version of an id that was kept.
E_FP: Final = 1
E_SRC: Final = 2
E_RULE: Final = 3
E_RELATED: Final = 4
E_ANCESTOR: Final = 5
E_CHILD: Final = 6
E_REPLY_TEXT: Final = 7


def entry_record(ctx: Context) -> list | None:
    """The remembered first occurrence of this entry's id, unless it is this very record."""
    record = ctx.recall(ctx.entry.record_key)
    if record is None or record[E_SRC] == ctx.source_hash:
        return None
    return record


def redelivery(ctx: Context, record: list | None) -> Drop | None:
    if record is None:
        return None
    if record[E_FP] == ctx.entry.fingerprint or record[E_FP] == legacy_fingerprint(ctx.entry):
        return Drop(REDELIVERY, ctx.entry.id)
    # A conflicting version is kept, so a copy of it is a redelivery too: remember each version.
    version_key = f"v:{ctx.entry.id}\x00{ctx.entry.fingerprint:x}"
    version = ctx.recall(version_key)
    if version is not None and version[1] != ctx.source_hash:
        return Drop(REDELIVERY, ctx.entry.id)
    ctx.alert(
        "entry_id_conflict",
        Severity.WARNING,
        f"kept {ctx.entry.id}: its id was seen before with other content",
        evidence=conflict_evidence(ctx.entry, record),
        related=ctx.entry.id,
    )
    if version is None:
        ctx.remember(version_key, ctx.source_hash)
    return None


def legacy_fingerprint(entry: Entry) -> int:
    """The fingerprint versions before 5ed614d remembered: the line's digest, all 64 bits.
    A record they wrote survives an upgrade (its state is read as it is, CHANGELOG.md), and
    its redelivery must still be one. Only asked when the fingerprints differ (a conflict or
    such a record), and a line matches another's digest by chance once in 2**64."""
    return digest64(entry.raw)


def kept_ancestor(ctx: Context) -> str | None:
    """The nearest kept entry up the entry's parent chain: dropped entries remember theirs."""
    parent_id = ctx.entry.parent_id
    if parent_id is None:
        return None
    parent = ctx.parent_record()
    if parent is None or parent[E_RULE] is None:
        return parent_id
    return parent[E_ANCESTOR]


def output_parent(ctx: Context) -> tuple[str | None, list | None]:
    """The kept entry this one hangs below in the output (its parent, or where the copies up
    its chain were re-parented) and that entry's record, read once."""
    if not ctx.output_read:
        parent_id = kept_ancestor(ctx)
        if parent_id == ctx.entry.parent_id:
            record = ctx.parent_record()
        else:
            record = ctx.recall(record_key(parent_id)) if parent_id is not None else None
        ctx.output_id, ctx.output_value, ctx.output_read = parent_id, record, True
    return ctx.output_id, ctx.output_value


def kept_in_place_of(ctx: Context, entry_id: str) -> str | None:
    """`entry_id` if it was kept (or is unknown), else where its descendants went."""
    record = ctx.recall(record_key(entry_id))
    if record is None or record[E_RULE] is None:
        return entry_id
    return record[E_ANCESTOR]


def conflict_evidence(entry: Entry, record: list) -> dict:
    return {"fingerprint": f"{entry.fingerprint:016x}", "first_fingerprint": f"{record[E_FP]:016x}"}


@dataclass(slots=True)
class KeyUse:
    """What a message's idempotency key leaves behind, applied only if the message is kept:
    a dropped message must leave no trace, or cleaning a cleaned session would differ."""

    key: str
    fingerprint: int
    identity: str | None
    collides_with: str | None

    def apply(self, ctx: Context) -> None:
        entry = ctx.entry
        if self.collides_with is not None:
            ctx.alert(
                "idempotency_key_collision",
                Severity.WARNING,
                f"kept {entry.id}: idempotency key reused by entry {self.collides_with} "
                "with other content",
                evidence={"idempotency_key": self.key, "positional": self.identity is not None},
                related=self.collides_with,
            )
        if self.identity is not None:
            ctx.remember(self.identity, entry.id)
        ctx.remember("k:" + self.key, self.fingerprint, entry.id)


def idempotent_replay(ctx: Context) -> Drop | KeyUse | None:
    """A Drop for a replayed message; else what its key leaves behind if it is kept."""
    entry = ctx.entry
    key = entry.idempotency_key
    if key is None:
        return None
    fingerprint = entry.content_fingerprint
    positional = positional_scope(key)
    identity = None
    if positional is not None:
        _note_positional_keys(ctx, key)
        scope, role = positional
        identity = f"i:{scope}\x00{role}\x00{fingerprint:x}"
        seen = ctx.recall(identity)
        if seen is not None and seen[1] != entry.id:
            return Drop(IDEMPOTENT_REPLAY, seen[1])
    previous = ctx.recall("k:" + key)
    collides_with = None
    if previous is not None and previous[2] != entry.id:
        if previous[1] == fingerprint:
            return Drop(IDEMPOTENT_REPLAY, previous[2])
        collides_with = previous[2]
    return KeyUse(key, fingerprint, identity, collides_with)


def announce_retry(ctx: Context, key_use: KeyUse) -> Drop | None:
    """A retried announce delivery: its key is the first attempt's with a `:retry-N` suffix
    (rotated so that a transport's cached failure cannot stand in for the new attempt), and
    its role and content are the first attempt's. Other content under a retried key is kept."""
    if not key_use.key.startswith("announce:"):
        return None
    match = _ANNOUNCE_RETRY.match(key_use.key)
    if match is None:
        return None
    first = ctx.recall("k:" + match["base"])
    if first is not None and first[1] == key_use.fingerprint and first[2] != ctx.entry.id:
        return Drop(ANNOUNCE_RETRY_DUPLICATE, first[2])
    return None


def _note_positional_keys(ctx: Context, key: str) -> None:
    if ctx.state.positional_alerted:
        return
    ctx.state.positional_alerted = True
    ctx.alert(
        "positional_idempotency_key",
        Severity.INFO,
        "session uses positional idempotency keys (scope:role:index), which shift "
        "when a snapshot changes; deduplicating them by scope, role and content",
        evidence={"idempotency_key": key},
        related=ctx.entry.id,
        about_session=True,
    )
