"""Rules 3-6: assistant entries that repeat the reply just before them in the same turn.

Each rule compares hashes of normalized text with the turn state, never fires on empty
text, and returns the id of the entry the duplicate repeats.
"""

from __future__ import annotations

from typing import Final

from stream.engine.context import Context
from stream.engine.entry import Entry, record_key
from stream.engine.records import Severity
from stream.engine.rules.drops import Drop, DropRule, text_evidence
from stream.engine.rules.identity import E_REPLY_TEXT, E_RULE, kept_ancestor
from stream.engine.state import ASSISTANT
from stream.engine.text import digest64

DELIVERY_MIRROR_DUPLICATE: Final[DropRule] = DropRule(
    "delivery_mirror_duplicate",
    Severity.INFO,
    "transcript-only mirror repeats assistant",
    lambda entry: {**text_evidence(entry), "model": entry.provider_model[1]},
)
CLI_MIRROR_DUPLICATE: Final[DropRule] = DropRule(
    "cli_mirror_duplicate",
    Severity.WARNING,
    "cli copy repeats the assistant message",
    text_evidence,
)
CLEANED_CHILD_DUPLICATE: Final[DropRule] = DropRule(
    "cleaned_child_duplicate",
    Severity.INFO,
    "text-only child repeats its parent reply",
    text_evidence,
)


def _echo_evidence(entry: Entry) -> dict:
    provider, model = entry.provider_model
    usage = entry.usage_kind
    return {
        **text_evidence(entry),
        "provider": provider,
        "model": model,
        "usage": "identical" if usage == "counted" else usage,
    }


MISTAGGED_ECHO: Final[DropRule] = DropRule(
    "mistagged_echo",
    Severity.WARNING,
    "echo carrying the provider, model and usage of reply",
    _echo_evidence,
)


def model_hash(entry: Entry) -> int:
    provider, model = entry.provider_model
    return digest64(f"{provider}\x00{model}".encode())


def delivery_mirror_duplicate(ctx: Context) -> Drop | None:
    """A mirror that repeats a model reply of its turn. What it is compared with depends on
    the correlation it carries: the reply it names as its source; with an identity of its
    own send and no source (a channel final), only a reply that declares it is mirrored;
    with neither, the turn's latest reply, else the reply it hangs below. A mirror that
    carries more than text (media, attachments, other blocks) is not a copy of any."""
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
        return None
    if entry.text_hash == state.latest_text_hash and not (
        # Two mirrors of one text are two sends when the later has an identity of its own.
        state.latest_is_mirror and entry.idempotency_key is not None
    ):
        return Drop(DELIVERY_MIRROR_DUPLICATE, state.latest_text_id)
    return _reply_above(ctx)


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
    parent_id = kept_ancestor(ctx)
    if parent_id is None:
        return None
    named = ctx.parent_record()
    parent = named if parent_id == ctx.entry.parent_id else ctx.recall(record_key(parent_id))
    if _turn_reply_text(ctx, parent) == ctx.entry.text_hash:
        return Drop(DELIVERY_MIRROR_DUPLICATE, parent_id)
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


def cli_mirror_duplicate(ctx: Context) -> Drop | None:
    state, entry = ctx.state, ctx.entry
    if (
        entry.field("api") == "cli"
        and state.last_role == ASSISTANT
        and entry.text_hash == state.last_text_hash
    ):
        return Drop(CLI_MIRROR_DUPLICATE, state.last_id)
    return None


def cleaned_child_duplicate(ctx: Context) -> Drop | None:
    """A copy of its parent reply: the cleaned `[text]` of a raw reply that thought, or the
    zero-usage delivery receipt of a plain reply. Two replies billed on their own are two
    model turns, whatever they say (OpenClaw replays both)."""
    state, entry = ctx.state, ctx.entry
    if not (
        entry.is_text_only
        and state.prev_id is not None
        # the parent as the cleaned output names it, so that cleaning twice changes nothing
        and kept_ancestor(ctx) == state.prev_id
        and entry.text_hash == state.prev_text_hash
    ):
        return None
    if state.prev_thinking and _copies_usage(entry, state.prev_usage_hash):
        return Drop(CLEANED_CHILD_DUPLICATE, state.prev_id)
    if state.prev_plain and state.last_id == state.prev_id and _is_receipt(entry):
        return Drop(CLEANED_CHILD_DUPLICATE, state.prev_id)
    return None


def _copies_usage(entry: Entry, usage_hash: int) -> bool:
    """An echo carries no usage, zero usage or its original's: a call of its own is billed."""
    return entry.usage_kind != "counted" or entry.usage_hash == usage_hash


def _is_receipt(entry: Entry) -> bool:
    """OpenClaw's bare delivery receipt (replay-history `isBareDeliveryMirrorDuplicate`): no
    mirror marker, a usage object of zeros, stopped normally, no tool calls (text only)."""
    return (
        entry.usage_kind == "zero"
        and entry.field("stopReason") == "stop"
        and entry.field("openclawDeliveryMirror") is None
        and not entry.is_mirror
    )


def mistagged_echo(ctx: Context) -> Drop | None:
    state, entry = ctx.state, ctx.entry
    if (
        state.last_role == ASSISTANT
        and state.prev_thinking
        and entry.text_hash == state.prev_text_hash
        and not entry.has_thinking
        and not entry.has_tool_calls
        and model_hash(entry) == state.prev_model_hash
        and _copies_usage(entry, state.prev_usage_hash)
    ):
        return Drop(MISTAGGED_ECHO, state.prev_id)
    return None


# Rules 4-6, for the copies of a model reply that are not mirrors.
COPY_RULES: Final = (
    cli_mirror_duplicate,
    cleaned_child_duplicate,
    mistagged_echo,
)


def find_echo(ctx: Context) -> Drop | None:
    """The first of rules 3-6 that matches an assistant entry with text. A mirror is judged
    by rule 3 alone: what it repeats is decided by what it says it delivered."""
    entry = ctx.entry
    if entry.role != "assistant" or not entry.text_hash:
        return None
    if entry.is_mirror:
        return delivery_mirror_duplicate(ctx)
    for rule in COPY_RULES:
        drop = rule(ctx)
        if drop is not None:
            return drop
    return None
