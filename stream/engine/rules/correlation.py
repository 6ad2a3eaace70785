"""Evidence: a copy that says what it copies. A transcript-only mirror carries the correlation
of what it delivered (`openclawDeliveryMirror.sourceAssistantMessageId`, a send of its own, the
reply its `parentId` names); what it is compared with follows from that: `silent_turn_replay`,
`delivery_mirror_duplicate`, and the detection `uncorrelated_mirror_copy`.

A rule of this evidence is a function `(ctx) -> Drop | None` that `find` tries in order on a
mirror with text (the only entries this evidence judges); its `DropRule` goes into `RULES` at
the same place.
"""

from __future__ import annotations

from typing import Final

from stream.engine import kinds
from stream.engine.context import Context
from stream.engine.entry import record_key
from stream.engine.rules.drops import Drop, DropRule, text_evidence
from stream.engine.rules.tree import output_parent
from stream.engine.stored import E_REPLY_TEXT, E_RULE, REPLY_TEXT

DELIVERY_MIRROR_DUPLICATE: Final[DropRule] = DropRule(
    kinds.DELIVERY_MIRROR_DUPLICATE,
    "transcript-only mirror repeats assistant",
    lambda entry: {**text_evidence(entry), "model": entry.provider_model[1]},
)
SILENT_TURN_REPLAY: Final[DropRule] = DropRule(
    kinds.SILENT_TURN_REPLAY,
    "mirror in a heartbeat turn that stayed silent repeats the previous turn's reply",
    lambda entry: {**text_evidence(entry), "model": entry.provider_model[1]},
)


def delivery_mirror_duplicate(ctx: Context) -> Drop | None:
    """A mirror that repeats a model reply of its turn. What it is compared with depends on
    the correlation it carries: the reply it names as its source; with an identity of its
    own send and no source (a channel final), a latest reply that declares it is mirrored,
    else the reply it hangs below; with neither, the turn's latest reply, else the reply it
    hangs below. A mirror that carries more than text (media, attachments, other blocks) is
    not a copy of any."""
    state, entry = ctx.state, ctx.entry
    if entry.has_attachments or entry.has_non_text_blocks:
        return None
    marker = entry.delivery_marker
    source = marker.get("sourceAssistantMessageId")
    if isinstance(source, str) and source:
        return _named_reply(ctx, source)
    if _names_own_send(marker):
        if state.latest_mirrored and entry.text_hash == state.latest_text_hash:
            return Drop(DELIVERY_MIRROR_DUPLICATE, state.latest_text_id)
        # Rows written before 2026.9.6 name no source (#126090, #121643): the reply their
        # `parentId` names, whose final text they repeat, is the one they delivered. One whose
        # `parentId` names a channel final is another send of that text: kept.
        parent = ctx.parent_record()
        if parent is not None and parent[E_RULE] == DELIVERY_MIRROR_DUPLICATE.name:
            return None
        return _reply_above(ctx)
    if entry.idempotency_key is None and not state.turn_sent:
        # It records no send of its own (no key, no message-tool send in its turn): a copy of
        # any kept reply with its text, however far back and whatever came between. Before a
        # model reply answered a person's latest message, it is the delivery of an answer to
        # that message, and only the replies since it count: OpenClaw's session memory keeps
        # such a mirror (tests/peer, session-memory).
        earlier = ctx.recall(_reply_slot(entry.text_hash))
        if earlier is not None and (state.person_answered or earlier[0] > state.person_seq):
            return Drop(DELIVERY_MIRROR_DUPLICATE, earlier[1])
    if entry.text_hash == state.latest_text_hash and not (
        # Two mirrors of one text are two sends when the later has an identity of its own.
        state.latest_is_mirror and entry.idempotency_key is not None
    ):
        return Drop(DELIVERY_MIRROR_DUPLICATE, state.latest_text_id)
    return _reply_above(ctx)


# A kept model reply, by the text a mirror of it repeats (stored.REPLY_TEXT): the latest such
# reply. Replies that call tools count too: OpenClaw delivers the text before a tool call as a
# block of its own, and mirrors each delivery.


def _reply_slot(text_hash: int) -> str:
    return f"{REPLY_TEXT}{text_hash:x}"


def index_reply(ctx: Context) -> None:
    """Remember a kept model reply by its final text, for the mirrors that record no send of
    their own: they are compared with every reply since a person's message, not only the
    turn's latest."""
    ctx.remember(_reply_slot(ctx.entry.reply_text_hash), [ctx.entry.id])


def _names_own_send(marker: dict) -> bool:
    """The marker identifies the channel message or user turn it delivered for."""
    for name in ("sourceMessageId", "sourceTurnId"):
        value = marker.get(name)
        if isinstance(value, str) and value:
            return True
    return False


def _named_reply(ctx: Context, source: str) -> Drop | None:
    """The mirror names its source reply: a copy when that kept reply of the turn has its
    text. A reply not remembered (forgotten, or never in the session) proves nothing."""
    state, entry = ctx.state, ctx.entry
    if source == state.latest_text_id and not state.latest_is_mirror:
        matches = entry.text_hash == state.latest_text_hash
    else:
        matches = _turn_reply_text(ctx, ctx.recall(record_key(source))) == entry.text_hash
    return Drop(DELIVERY_MIRROR_DUPLICATE, source) if matches else None


def _reply_above(ctx: Context) -> Drop | None:
    """The mirror hangs below a kept reply of its turn with its text: OpenClaw's writer
    appends to the active branch, which a `leaf` entry may have moved back to that reply."""
    parent_id, parent = output_parent(ctx)
    if parent_id is not None and _turn_reply_text(ctx, parent) == ctx.entry.text_hash:
        return Drop(DELIVERY_MIRROR_DUPLICATE, parent_id)
    return None


def silent_turn_replay(ctx: Context) -> Drop | None:
    """A heartbeat turn whose model stayed silent (`NO_REPLY`, `HEARTBEAT_OK`) delivered
    nothing, so a mirror in it that repeats the previous turn's final reply is that reply
    committed again (#143787), not a new message."""
    state, entry = ctx.state, ctx.entry
    if (
        state.heartbeat_silent
        and state.heartbeat_hash
        and entry.text_hash == state.heartbeat_hash
        and not (entry.has_attachments or entry.has_non_text_blocks)
    ):
        return Drop(SILENT_TURN_REPLAY, state.heartbeat_id)
    return None


def _turn_reply_text(ctx: Context, record: list | None) -> int:
    """The reply text hash a remembered kept reply of the current turn left, else 0."""
    if (
        record is None
        or record[E_RULE] is not None
        or len(record) <= E_REPLY_TEXT
        or record[0] <= ctx.state.turn_seq
    ):
        return 0
    value = record[E_REPLY_TEXT]
    return value if isinstance(value, int) else 0


def uncorrelated_mirror_copy(ctx: Context) -> None:
    """Detection, for a kept mirror: a channel final that names no source reply repeats the
    turn's latest reply. OpenClaw's writer keeps such keyed rows and its Gateway shows them
    (they may be a second send of one text); older releases wrote one after every reply
    (#126090), which doubles a memory file. Only a reader that knows its channel can tell."""
    state, entry = ctx.state, ctx.entry
    if not entry.is_mirror or entry.has_attachments or entry.has_non_text_blocks:
        return
    marker = entry.delivery_marker
    if marker.get("kind") not in _FINAL_KINDS or marker.get("sourceAssistantMessageId"):
        return
    if state.latest_is_mirror or not entry.text_hash or entry.text_hash != state.latest_text_hash:
        return
    ctx.alert(
        kinds.UNCORRELATED_MIRROR_COPY,
        f"kept {entry.id}: a channel final naming no source repeats reply {state.latest_text_id}",
        evidence={**text_evidence(entry), "idempotency_key": entry.idempotency_key},
        related=state.latest_text_id,
    )


_FINAL_KINDS: Final = ("channel-final", "channel-final-suppressed")


def find(ctx: Context) -> Drop | None:
    """The first rule that drops a mirror with text. A mirror is judged by this evidence
    alone: what it repeats is decided by what it says it delivered; in a heartbeat turn that
    stayed silent, by the turn's silence first (the more telling of the two)."""
    entry = ctx.entry
    if entry.role != "assistant" or not entry.is_mirror or not entry.text_hash:
        return None
    return silent_turn_replay(ctx) or delivery_mirror_duplicate(ctx)


RULES: Final[tuple[DropRule, ...]] = (SILENT_TURN_REPLAY, DELIVERY_MIRROR_DUPLICATE)


# What a mirror that records no send of its own is compared with (format 4): whether a reply of
# the turn sent a message through OpenClaw's `message` tool, the latest message a person sent,
# and whether a reply answered it.


def open_turn(ctx: Context) -> None:
    state = ctx.state
    state.turn_sent = False
    if ctx.indexes_identities and ctx.entry.from_person:
        state.person_seq, state.person_answered = state.seq, False


def note_reply(ctx: Context) -> None:
    if not ctx.indexes_identities:
        return
    state, entry = ctx.state, ctx.entry
    state.turn_sent = state.turn_sent or entry.calls_message_tool
    state.person_answered = state.person_answered or bool(entry.reply_text_hash)
