"""Rules 3-6: assistant entries that repeat the reply just before them in the same turn.

Each rule compares hashes of normalized text with the turn state, never fires on empty
text, and returns the id of the entry the duplicate repeats.
"""

from __future__ import annotations

from typing import Final

from stream.engine.context import Context
from stream.engine.entry import Entry
from stream.engine.records import Severity
from stream.engine.rules.drops import Drop, DropRule, text_evidence
from stream.engine.rules.identity import kept_ancestor
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
    state, entry = ctx.state, ctx.entry
    if entry.is_mirror and entry.text_hash == state.latest_text_hash:
        return Drop(DELIVERY_MIRROR_DUPLICATE, state.latest_text_id)
    return None


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
    state, entry = ctx.state, ctx.entry
    if (
        entry.is_text_only
        and state.prev_id is not None
        # the parent as the cleaned output names it, so that cleaning twice changes nothing
        and kept_ancestor(ctx) == state.prev_id
        and entry.text_hash == state.prev_text_hash
    ):
        return Drop(CLEANED_CHILD_DUPLICATE, state.prev_id)
    return None


def mistagged_echo(ctx: Context) -> Drop | None:
    state, entry = ctx.state, ctx.entry
    if (
        state.last_role == ASSISTANT
        and state.prev_thinking
        and entry.text_hash == state.prev_text_hash
        and not entry.has_thinking
        and not entry.has_tool_calls
        and model_hash(entry) == state.prev_model_hash
        and (entry.usage_kind != "counted" or entry.usage_hash == state.prev_usage_hash)
    ):
        return Drop(MISTAGGED_ECHO, state.prev_id)
    return None


ECHO_RULES: Final = (
    delivery_mirror_duplicate,
    cli_mirror_duplicate,
    cleaned_child_duplicate,
    mistagged_echo,
)


def find_echo(ctx: Context) -> Drop | None:
    """The first of rules 3-6 that matches an assistant entry with text."""
    if ctx.entry.role != "assistant" or not ctx.entry.text_hash:
        return None
    for rule in ECHO_RULES:
        drop = rule(ctx)
        if drop is not None:
            return drop
    return None
