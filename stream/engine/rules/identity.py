"""The same entry (its id, its bytes) delivered again by a source or the broker. Tried before any
evidence of a copy: a redelivered entry is not a copy but the entry itself. An entry OpenClaw
rewrote in place (2026.8+ `rewriteTranscriptMessageAtAnchor` annotates a row where it is: the
Codex prompt's mirror identity, a steer's target run) comes again from the store sources with
its id and other bytes; when its key still names it with the same role and content, it is that
entry again, with facts added, and no new message."""

from __future__ import annotations

from typing import Final

from stream.engine import kinds
from stream.engine.context import Context
from stream.engine.entry import Entry
from stream.engine.rules.drops import Drop, DropRule
from stream.engine.rules.keys import key_slot
from stream.engine.stored import E_FP, E_SRC, VERSION
from stream.engine.text import digest64

REDELIVERY: Final[DropRule] = DropRule(
    kinds.REDELIVERY,
    "same id and same bytes as entry",
    lambda entry: {"fingerprint": f"{entry.fingerprint:016x}"},
)
REWRITTEN_IN_PLACE: Final[DropRule] = DropRule(
    kinds.REWRITTEN_IN_PLACE,
    "the same message rewritten in place, with its id, key, role and content, as entry",
    lambda entry: {"fingerprint": f"{entry.fingerprint:016x}",
                   "idempotency_key": entry.idempotency_key},
)
RULES: Final[tuple[DropRule, ...]] = (REDELIVERY, REWRITTEN_IN_PLACE)


def entry_record(ctx: Context) -> list | None:
    """The remembered first occurrence of this entry's id, unless it is this very record."""
    record = ctx.recall(ctx.entry.record_key)
    if record is None or record[E_SRC] == ctx.source_hash:
        return None
    return record


def legacy_fingerprint(entry: Entry) -> int:
    """The fingerprint versions before 5ed614d remembered: the line's digest, all 64 bits.
    A record they wrote survives an upgrade (its state is read as it is, CHANGELOG.md), and
    its redelivery must still be one. Only asked when the fingerprints differ (a conflict or
    such a record), and a line matches another's digest by chance once in 2**64."""
    return digest64(entry.raw)


def redelivery(ctx: Context, record: list | None) -> Drop | None:
    if record is None:
        return None
    if record[E_FP] == ctx.entry.fingerprint or record[E_FP] == legacy_fingerprint(ctx.entry):
        return Drop(REDELIVERY, ctx.entry.id)
    # A conflicting version is kept, so a copy of it is a redelivery too: remember each version.
    version_key = f"{VERSION}{ctx.entry.id}\x00{ctx.entry.fingerprint:x}"
    version = ctx.recall(version_key)
    if version is not None and version[1] != ctx.source_hash:
        return Drop(REDELIVERY, ctx.entry.id)
    if _rewritten_in_place(ctx):
        return Drop(REWRITTEN_IN_PLACE, ctx.entry.id)
    ctx.alert(
        kinds.ENTRY_ID_CONFLICT,
        f"kept {ctx.entry.id}: its id was seen before with other content",
        evidence=conflict_evidence(ctx.entry, record),
        related=ctx.entry.id,
    )
    if version is None:
        ctx.remember(version_key, [ctx.source_hash])
    return None


def _rewritten_in_place(ctx: Context) -> bool:
    """The entry's idempotency key names this very entry with its role and content."""
    entry = ctx.entry
    key = entry.idempotency_key
    if key is None:
        return False
    owner = ctx.recall(key_slot(entry.role, key))
    return owner is not None and owner[2] == entry.id and owner[1] == entry.content_fingerprint


def conflict_evidence(entry: Entry, record: list) -> dict:
    return {"fingerprint": f"{entry.fingerprint:016x}", "first_fingerprint": f"{record[E_FP]:016x}"}
