"""Rules 3-6: assistant entries that repeat a reply of their turn.

Each rule compares hashes of normalized text with the turn state, never fires on empty
text, and returns the id of the entry the duplicate repeats.
"""

from __future__ import annotations

from typing import Final

from stream.engine.context import Context
from stream.engine.entry import Entry, record_key
from stream.engine.records import Severity
from stream.engine.rules.drops import Drop, DropRule, text_evidence
from stream.engine.rules.identity import E_REPLY_TEXT, E_RULE, kept_ancestor, output_parent
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
SILENT_TURN_REPLAY: Final[DropRule] = DropRule(
    "silent_turn_replay",
    Severity.WARNING,
    "mirror in a heartbeat turn that stayed silent repeats the previous turn's reply",
    lambda entry: {**text_evidence(entry), "model": entry.provider_model[1]},
)
CLI_AGGREGATE_DUPLICATE: Final[DropRule] = DropRule(
    "cli_aggregate_duplicate",
    Severity.WARNING,
    "cli record joins the turn's replies that end with",
    text_evidence,
)
CLI_REIMPORT_DUPLICATE: Final[DropRule] = DropRule(
    "cli_reimport_duplicate",
    Severity.WARNING,
    "imported copy repeats the committed cli reply",
    lambda entry: {**text_evidence(entry), "imported_from": entry.imported_from},
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
        "uncorrelated_mirror_copy",
        Severity.INFO,
        f"kept {entry.id}: a channel final naming no source repeats reply {state.latest_text_id}",
        evidence={**text_evidence(entry), "idempotency_key": entry.idempotency_key},
        related=state.latest_text_id,
    )


_FINAL_KINDS: Final = ("channel-final", "channel-final-suppressed")


def cli_mirror_duplicate(ctx: Context) -> Drop | None:
    """The CLI persister's copy of the reply before it. One that carries a key of its own
    after another `api: "cli"` reply is a second run (a retry under `cli-assistant:<runId>`:
    the same key would be an idempotent replay), which OpenClaw keeps."""
    state, entry = ctx.state, ctx.entry
    if (
        entry.api == "cli"
        and state.last_role == ASSISTANT
        and entry.text_hash == state.last_text_hash
        and not (state.last_cli and entry.idempotency_key is not None)
    ):
        return Drop(CLI_MIRROR_DUPLICATE, state.last_id)
    return None


def cli_aggregate_duplicate(ctx: Context) -> Drop | None:
    """The CLI persister's record of a whole turn, the `"\n\n"` join of the model replies
    it streamed (#118185, #143106): its text is two or more of the turn's model replies'
    texts, all of them, in order, whatever came between them (tool calls, their results).
    The replies are kept; the record repeats them. A copy of one reply is rule 4's."""
    state, entry = ctx.state, ctx.entry
    if (
        state.parts_count < 2
        or entry.api != "cli"
        or state.parts_length <= 0
        or state.latest_is_mirror
        or state.latest_cli
        or not entry.is_text_only
        or entry.has_attachments
    ):
        return None
    if entry.normalized_crc() == (state.parts_crc, state.parts_length):
        return Drop(CLI_AGGREGATE_DUPLICATE, state.latest_text_id)
    return None


def cli_reimport_duplicate(ctx: Context) -> Drop | None:
    """A reply read back from the CLI's own session file (`__openclaw.importedFrom`) after a
    resume, repeating the committed `api: "cli"` reply of its turn (#136251). The import
    carries no key of the run; the committed reply is the one OpenClaw wrote."""
    state, entry = ctx.state, ctx.entry
    if (
        state.latest_cli
        and not state.latest_is_mirror
        and entry.imported_from is not None
        and entry.is_text_only
        and entry.reply_text_hash == state.latest_text_hash
    ):
        return Drop(CLI_REIMPORT_DUPLICATE, state.latest_text_id)
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
    cli_aggregate_duplicate,
    cli_reimport_duplicate,
    cleaned_child_duplicate,
    mistagged_echo,
)


def find_echo(ctx: Context) -> Drop | None:
    """The first of rules 3-6 that matches an assistant entry with text. A mirror is judged
    by rules 3 and 3a alone: what it repeats is decided by what it says it delivered."""
    entry = ctx.entry
    if entry.role != "assistant" or not entry.text_hash:
        return None
    if entry.is_mirror:
        drop = delivery_mirror_duplicate(ctx)
        return drop if drop is not None else silent_turn_replay(ctx)
    for rule in COPY_RULES:
        drop = rule(ctx)
        if drop is not None:
            return drop
    return None
