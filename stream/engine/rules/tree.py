"""Where an entry hangs: the records the session remembers of its entries, the kept entry a
copy's descendants move to, and the entry a new one stands beside. Every evidence reads these."""

from __future__ import annotations

from stream.engine.context import Context
from stream.engine.entry import record_key
from stream.engine.rules.drops import Drop
from stream.engine.stored import E_ANCESTOR, E_CHILD, E_RELATED, E_RULE, ROOT


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


def chain_original(ctx: Context) -> str | None:
    """The entry this one stands beside: the first kept child of the entry it hangs below or,
    when that has none yet, of the entry that one stands for. Read once."""
    if not ctx.original_read:
        ctx.original_read = True
        ctx.original_id = _first_child_alongside(ctx)
    return ctx.original_id


def _first_child_alongside(ctx: Context) -> str | None:
    # An entry that hangs at the root in the output (parentless, or re-parented there around a
    # dropped copy) stands beside the root: cleaning the output again sees it parentless.
    parent_id, parent = output_parent(ctx)
    if parent is None:
        return _first_root(ctx) if parent_id is None else None
    child = parent[E_CHILD]
    if child is not None and child != ctx.entry.id:
        return child
    stands_for = parent[E_RELATED] if parent[E_RULE] is None else None
    if not isinstance(stands_for, str):
        return None
    origin = ctx.recall(record_key(stands_for))
    child = origin[E_CHILD] if origin is not None else None
    return child if isinstance(child, str) and child != ctx.entry.id else None


# The session's first kept entry without a parent (stored.ROOT): a parentless entry stands
# beside it, as a branch written again from the root is (#73119).


def _first_root(ctx: Context) -> str | None:
    root = ctx.recall(ROOT)
    return root[1] if root is not None and root[1] != ctx.entry.id else None


def note_root(ctx: Context) -> None:
    """Remember a kept entry that hangs at the root in the output as the root, unless the
    session has one."""
    if ctx.recall(ROOT) is None:
        ctx.remember(ROOT, [ctx.entry.id])


def stand_in(ctx: Context, drop: Drop) -> str | None:
    """Where what hangs below a dropped copy goes: its nearest kept ancestor; or the entry it
    repeats, when the copy took that entry's place: its rule says so, or it stands beside it
    (both children of one entry, as a reply to one of two equal user messages would be, or
    each in its own copy of a branch)."""
    parent_id, _ = output_parent(ctx)
    related = drop.related
    if related is not None and (
        drop.rule.stands_in or drop.stands_in or chain_original(ctx) == related
    ):
        return related
    return parent_id


def answers_turn_opener(ctx: Context) -> bool:
    """The entry hangs, in the output, directly below the user message that opened its turn
    (whose record was written at the turn's seq)."""
    _, parent = output_parent(ctx)
    return parent is not None and parent[0] == ctx.state.turn_seq
