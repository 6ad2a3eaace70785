"""The shape of the transcript tree and of tool calls: `dangling_parent`, `branch_fork`,
`orphaned_tool_call` and `unknown_tool_result`, and a session met mid-way:
`session_seen_midway` (entry kept)."""

from __future__ import annotations

from stream.engine import kinds
from stream.engine.context import Context
from stream.engine.state import SessionState
from stream.engine.stored import E_CHILD, TOOL_CALL


def seen_midway(ctx: Context) -> None:
    """The session's first entry seen is not its header, and nothing is known of it: a fresh
    broker or state, a session the TTL forgot, or an excerpt. A copy of any earlier entry
    cannot be recognised, so the session is named once rather than cleaned silently."""
    entry = ctx.entry
    ctx.alert(
        kinds.SESSION_SEEN_MIDWAY,
        f"session {ctx.session.id} is known from entry {entry.id} on, not from its header: "
        "copies of its earlier entries cannot be recognised",
        evidence={"first_entry_type": entry.type},
        related=entry.id,
        discriminator="midway",
    )


def dangling_parent(ctx: Context, parent: list | None) -> None:
    entry = ctx.entry
    if entry.parent_id is None or parent is not None or not ctx.sure_of_history:
        return
    ctx.alert(
        kinds.DANGLING_PARENT,
        f"entry {entry.id} names parent {entry.parent_id}, which is not in the session",
        evidence={"parent_id": entry.parent_id},
        related=entry.parent_id,
    )


def branch_fork(ctx: Context, parent_id: str | None, parent: list | None) -> None:
    """`parent` is the record of the entry's parent after re-parenting."""
    entry = ctx.entry
    if parent is None or parent[E_CHILD] in (None, entry.id):
        return
    if entry.append_mode == "side" or entry.is_mirror or _answers_parent_call(ctx, parent_id):
        return
    ctx.alert(
        kinds.BRANCH_FORK,
        f"entry {entry.id} starts a second branch under {parent_id} "
        f"(first child {parent[E_CHILD]})",
        evidence={"parent_id": parent_id, "first_child_id": parent[E_CHILD]},
        related=parent_id,
    )


def _answers_parent_call(ctx: Context, parent_id: str | None) -> bool:
    call_id = ctx.entry.tool_call_id
    if call_id is None:
        return False
    call = ctx.recall(TOOL_CALL + call_id)
    return call is not None and call[1] == parent_id


def tool_calls(ctx: Context) -> None:
    """Tracks calls and results; a user message closes the turn and reports its open calls."""
    state, entry = ctx.state, ctx.entry
    call_id = entry.tool_call_id
    if call_id is not None:
        state.pending_calls = [call for call in state.pending_calls if call[0] != call_id]
        if ctx.recall(TOOL_CALL + call_id) is None and ctx.sure_of_history:
            ctx.alert(
                kinds.UNKNOWN_TOOL_RESULT,
                f"tool result {entry.id} answers call {call_id}, never made in this session",
                evidence={"tool_call_id": call_id},
            )
        return
    if entry.role == "user":
        for open_call, caller in state.pending_calls:
            ctx.alert(
                kinds.ORPHANED_TOOL_CALL,
                f"tool call {open_call} of entry {caller} got no result before the turn ended",
                evidence={"tool_call_id": open_call, "turn_ended_by": entry.id},
                entry_id=caller,
                discriminator=open_call,
            )
        return
    if entry.role == "assistant":
        for new_call in entry.tool_call_ids:
            # the reply that issued it (what its result is scoped by), and what the reply says
            # (a tool call id the provider names once identifies the reply: rules/identities)
            if ctx.indexes_identities:
                digest, stamp = entry.message_token
                ctx.remember(TOOL_CALL + new_call, [entry.id, digest, stamp])
            else:
                ctx.remember(TOOL_CALL + new_call, [entry.id])
            if len(state.pending_calls) < ctx.limits.max_pending_calls:
                state.pending_calls.append([new_call, entry.id])


def open_turn(state: SessionState) -> None:
    """A user message ended the turn: `tool_calls` reported its open calls."""
    state.pending_calls = []
