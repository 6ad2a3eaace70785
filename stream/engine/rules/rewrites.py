"""Rule 2b: an entry re-appended under a new id where a rewrite put its copy.

OpenClaw rewrites a transcript by branching (#115310): an overflow recovery or a compaction
appends the edited entry beside the one it replaces, then every later entry of the branch
again, under new ids and parents, each `message` as it was. The originals stay, earlier in the
stream. A reader that follows the stream line by line would read the copied turns twice.

A copy is recognised by where it hangs and what it carries, never by text alone: its parent
stands for the original's parent (it is the original's parent, or an entry kept beside it, or
a copy dropped in its place), the original is that parent's first kept child, and the copy's
payload (its `message` byte for byte, stamped with a time, or a compaction's fields) is the
original's. The copy then stands in for the original: what hangs below it is re-parented there.
"""

from __future__ import annotations

from typing import Final

from stream.engine.context import Context
from stream.engine.entry import payload_of, record_key
from stream.engine.records import Severity
from stream.engine.rules.drops import Drop, DropRule
from stream.engine.rules.identity import E_CHILD, E_FP, E_RELATED, E_RULE, output_parent

REWRITE_COPY: Final[DropRule] = DropRule(
    "rewrite_copy",
    Severity.INFO,
    "re-appended by a transcript rewrite, same payload as entry",
    lambda entry: {"payload": f"{entry.payload:08x}", "type": entry.type},
    stands_in=True,
)


def chain_original(ctx: Context) -> str | None:
    """The entry this one stands beside: the first kept child of the entry it hangs below or,
    when that has none yet, of the entry that one stands for. Read once."""
    if not ctx.original_read:
        ctx.original_read = True
        ctx.original_id = _first_child_alongside(ctx)
    return ctx.original_id


def _first_child_alongside(ctx: Context) -> str | None:
    _, parent = output_parent(ctx)
    if parent is None:
        return None
    child = parent[E_CHILD]
    if child is not None and child != ctx.entry.id:
        return child
    stands_for = parent[E_RELATED] if parent[E_RULE] is None else None
    if not isinstance(stands_for, str):
        return None
    origin = ctx.recall(record_key(stands_for))
    child = origin[E_CHILD] if origin is not None else None
    return child if isinstance(child, str) and child != ctx.entry.id else None


def stand_in(ctx: Context, drop: Drop) -> str | None:
    """Where what hangs below a dropped copy goes: its nearest kept ancestor; or the entry it
    repeats, when the copy took that entry's place: its rule says so, or it stands beside it
    (both children of one entry, as a reply to one of two equal user messages would be, or
    each in its own copy of a branch)."""
    parent_id, _ = output_parent(ctx)
    related = drop.related
    if related is not None and (drop.rule.stands_in or chain_original(ctx) == related):
        return related
    return parent_id


def rewrite_copy(ctx: Context) -> Drop | None:
    payload = ctx.entry.payload
    if not payload:
        return None
    original = chain_original(ctx)
    if original is None:
        return None
    record = ctx.recall(record_key(original))
    if record is None or record[E_RULE] is not None:
        return None
    fingerprint = record[E_FP]
    if isinstance(fingerprint, int) and payload_of(fingerprint) == payload:
        return Drop(REWRITE_COPY, original)
    return None
