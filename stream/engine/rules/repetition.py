"""Evidence: a repetition inside a turn. Where OpenClaw's own writers produce copies of a model
reply that are not mirrors (the CLI persister's copy and its join of the streamed parts, a CLI
session re-imported after a resume, a cleaned child of a raw reply, a delivery receipt, an echo
under the reply's provider), the copy's final text equals the reply's: the `cli_…`
rules, `cleaned_child_duplicate` and `mistagged_echo`.

Each rule compares hashes of normalized text with the turn state, never fires on empty
text, and returns the id of the entry the duplicate repeats. A rule of this evidence is a
function `(ctx) -> Drop | None` that `find` tries in order on a model reply with text; its
`DropRule` goes into `RULES` at the same place.
"""

from __future__ import annotations

from typing import Final

from stream.engine import kinds
from stream.engine.context import Context
from stream.engine.entry import Entry
from stream.engine.rules.drops import Drop, DropRule, text_evidence
from stream.engine.rules.tree import answers_turn_opener, kept_ancestor
from stream.engine.state import ASSISTANT, SessionState
from stream.engine.text import digest64

CLI_MIRROR_DUPLICATE: Final[DropRule] = DropRule(
    kinds.CLI_MIRROR_DUPLICATE,
    "cli copy repeats the assistant message",
    text_evidence,
)
CLI_AGGREGATE_DUPLICATE: Final[DropRule] = DropRule(
    kinds.CLI_AGGREGATE_DUPLICATE,
    "cli record joins the turn's replies that end with",
    text_evidence,
)
CLI_REIMPORT_DUPLICATE: Final[DropRule] = DropRule(
    kinds.CLI_REIMPORT_DUPLICATE,
    "imported copy repeats the committed cli reply",
    lambda entry: {**text_evidence(entry), "imported_from": entry.imported_from},
)
CLEANED_CHILD_DUPLICATE: Final[DropRule] = DropRule(
    kinds.CLEANED_CHILD_DUPLICATE,
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
    kinds.MISTAGGED_ECHO,
    "echo carrying the provider, model and usage of reply",
    _echo_evidence,
)


def model_hash(entry: Entry) -> int:
    provider, model = entry.provider_model
    # surrogatepass: a model name may hold a lone surrogate escape, valid JSON but not UTF-8
    return digest64(f"{provider}\x00{model}".encode("utf-8", "surrogatepass"))


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
    The replies are kept; the record repeats them. A copy of one reply is
    `cli_mirror_duplicate`'s."""
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
    """An echo of the reply before it. A reply that hangs directly below the user message
    that opened the turn (as the cleaned output names it: the answer to an input delivered
    again moves there) answers it, and is no echo, unless it carries the counted usage of the
    reply it repeats: a second delivery's own reply is billed on its own, or not at all, and
    an echo beside its reply copies the reply's usage verbatim."""
    state, entry = ctx.state, ctx.entry
    if (
        state.last_role == ASSISTANT
        and state.prev_thinking
        and entry.text_hash == state.prev_text_hash
        and not entry.has_thinking
        and not entry.has_tool_calls
        and model_hash(entry) == state.prev_model_hash
        and _copies_usage(entry, state.prev_usage_hash)
        and (_bills_as(entry, state.prev_usage_hash) or not answers_turn_opener(ctx))
    ):
        return Drop(MISTAGGED_ECHO, state.prev_id)
    return None


def _bills_as(entry: Entry, usage_hash: int) -> bool:
    """The entry carries a counted usage, and it is the one of `usage_hash`."""
    return entry.usage_kind == "counted" and entry.usage_hash == usage_hash


def find(ctx: Context) -> Drop | None:
    """The first rule that drops a model reply with text (mirrors are the correlation's)."""
    entry = ctx.entry
    if entry.role != "assistant" or entry.is_mirror or not entry.text_hash:
        return None
    return (
        cli_mirror_duplicate(ctx)
        or cli_aggregate_duplicate(ctx)
        or cli_reimport_duplicate(ctx)
        or cleaned_child_duplicate(ctx)
        or mistagged_echo(ctx)
    )


RULES: Final[tuple[DropRule, ...]] = (
    CLI_MIRROR_DUPLICATE,
    CLI_AGGREGATE_DUPLICATE,
    CLI_REIMPORT_DUPLICATE,
    CLEANED_CHILD_DUPLICATE,
    MISTAGGED_ECHO,
)


# The turn state these rules read is theirs: the CLI flags of the last message and the latest
# reply, the join of the turn's replies (`cli_aggregate_duplicate`), and the previous reply
# (`cleaned_child_duplicate`, `mistagged_echo`).


def open_turn(state: SessionState) -> None:
    state.prev_id = None
    state.prev_text_hash = 0
    state.prev_model_hash = 0
    state.prev_thinking = False
    state.prev_usage_hash = 0
    state.prev_plain = False
    state.parts_crc = 0
    state.parts_length = 0
    state.parts_count = 0
    state.latest_cli = False


def note_message(state: SessionState, entry: Entry, is_assistant: bool) -> None:
    """A kept message, the newest of its turn."""
    state.last_cli = is_assistant and entry.api == "cli"
    if not is_assistant:
        return
    if entry.text_hash:
        state.latest_cli = state.last_cli
        if not (entry.is_mirror or state.last_cli) and state.parts_length >= 0:
            state.parts_crc, state.parts_length = entry.extend_crc(
                state.parts_crc, state.parts_length
            )
            state.parts_count += 1
    state.prev_id = entry.id
    state.prev_text_hash = entry.text_hash
    # The model and usage of a reply are compared only with what follows a reply that thought
    # (`cleaned_child_duplicate` and `mistagged_echo` read them after `prev_thinking`): hashing
    # them for every reply cost more than the turn's other fields together.
    thought = entry.has_thinking
    state.prev_thinking = thought
    state.prev_model_hash = model_hash(entry) if thought else 0
    state.prev_usage_hash = entry.usage_hash if thought else 0
    state.prev_plain = entry.is_text_only and not entry.is_mirror
