"""What the replies of a session say about the model and the harness (entry kept):
`repetition_cascade`, `duplicate_storm`, `consecutive_assistant`, `thinking_rejection_loop`,
`error_loop` and `retried_prompt`."""

from __future__ import annotations

import re
from typing import Final

from stream.engine import kinds
from stream.engine.context import Context
from stream.engine.entry import Entry
from stream.engine.state import (
    FAIL_ASSISTANT,
    FAIL_MERGED,
    FAIL_NONE,
    FAIL_PROMPT,
    SessionState,
)
from stream.engine.text import repetition, text_hash

STORM_WINDOW: Final = 10
STORM_THRESHOLD: Final = 3
STORM_REARM: Final = 10
ERROR_LOOP_LENGTH: Final = 3
THINKING_LOOP_LENGTH: Final = 2
_STORM_MASK: Final = (1 << STORM_WINDOW) - 1

_THINKING_REJECTION: Final = re.compile(
    r"thinking\W.{0,60}blocks?\b.{0,120}cannot be modified"
    r"|invalid\W{0,3}signature\W.{0,40}thinking"
    r"|thinking\W.{0,40}invalid\W{0,3}signature",
    re.IGNORECASE | re.DOTALL,
)


def repetition_cascade(ctx: Context) -> None:
    entry = ctx.entry
    if entry.role != "assistant" or entry.is_mirror:
        return
    found = repetition(entry.visible_text, ctx.limits.min_repetition_unit)
    if found is None:
        return
    copies, unit_length = found
    ctx.alert(
        kinds.REPETITION_CASCADE,
        f"reply {entry.id} is {copies} verbatim copies of one {unit_length}-character unit",
        evidence={"copies": copies, "unit_length": unit_length},
    )


def retried_prompt(ctx: Context) -> None:
    """A user message that repeats the one that opened the turn, when every reply since was an
    empty failure (an idle timeout's `aborted` turn, an error): the harness replaying the
    prompt (#95766). Under the same key it is dropped as an idempotent replay; without one it
    cannot be told from a person sending it again, so it is kept and reported."""
    state, entry = ctx.state, ctx.entry
    if entry.role != "user" or not (state.retry_failed and state.retry_hash):
        return
    if entry.exact_text_hash != state.retry_hash:
        return
    ctx.alert(
        kinds.RETRIED_PROMPT,
        f"user message {entry.id} repeats {state.retry_id} after a reply that failed empty",
        evidence={"original_id": state.retry_id},
        related=state.retry_id,
    )


def duplicate_storm(ctx: Context, echo_dropped: bool) -> None:
    """Counts every assistant reply that reached the echo rules, dropped or kept."""
    state = ctx.state
    state.storm_window = ((state.storm_window << 1) | echo_dropped) & _STORM_MASK
    if not state.storm_armed:
        state.storm_clean = 0 if echo_dropped else state.storm_clean + 1
        if state.storm_clean >= STORM_REARM:
            state.storm_armed = True
        return
    dropped = state.storm_window.bit_count()
    if dropped >= STORM_THRESHOLD:
        state.storm_armed = False
        state.storm_clean = 0
        ctx.alert(
            kinds.DUPLICATE_STORM,
            f"{dropped} of the last {STORM_WINDOW} assistant replies were duplicates",
            evidence={"dropped": dropped, "window": STORM_WINDOW},
            related=ctx.entry.id,
        )


def consecutive_assistant(ctx: Context) -> None:
    state, entry = ctx.state, ctx.entry
    if entry.role in ("user", "toolResult"):
        state.reply_id = None
        return
    if entry.role != "assistant" or entry.is_mirror:
        return
    if state.reply_id is not None and not state.reply_error:
        ctx.alert(
            kinds.CONSECUTIVE_ASSISTANT,
            f"model replies {state.reply_id} and {entry.id} follow each other in one turn",
            evidence={"earlier_has_thinking": state.reply_thinking},
            related=state.reply_id,
            escalated=state.reply_thinking,
        )
    state.reply_id = entry.id
    state.reply_thinking = entry.has_thinking
    state.reply_error = entry.is_error


def is_thinking_rejection(message: object) -> bool:
    return isinstance(message, str) and _THINKING_REJECTION.search(message) is not None


def _prompt_error_text(entry: Entry) -> object:
    data = entry.value.get("data")
    return data.get("error") if isinstance(data, dict) else None


def thinking_rejection_loop(ctx: Context) -> None:
    state, entry = ctx.state, ctx.entry
    if entry.custom_type == "openclaw:prompt-error":
        if is_thinking_rejection(_prompt_error_text(entry)):
            _count_rejection(ctx, FAIL_PROMPT, merge_after=FAIL_ASSISTANT)
        return
    if entry.message is None:
        return
    if entry.role == "assistant" and not entry.is_mirror:
        if entry.is_error and is_thinking_rejection(entry.error_message):
            _count_rejection(ctx, FAIL_ASSISTANT, merge_after=FAIL_PROMPT)
            return
        state.think_count = 0
        state.think_alerted = False
    state.think_last = FAIL_NONE


def _count_rejection(ctx: Context, event: int, merge_after: int) -> None:
    state = ctx.state
    if state.think_last == merge_after:
        # The same failure written twice, once as prompt-error and once as reply.
        state.think_last = FAIL_MERGED
        return
    state.think_last = event
    state.think_count += 1
    if state.think_count >= THINKING_LOOP_LENGTH and not state.think_alerted:
        state.think_alerted = True
        ctx.alert(
            kinds.THINKING_REJECTION_LOOP,
            f"{state.think_count} replies in a row rejected for modified thinking blocks",
            evidence={"count": state.think_count},
        )


def error_loop(ctx: Context) -> None:
    state, entry = ctx.state, ctx.entry
    if entry.role != "assistant" or entry.is_mirror:
        return
    if not (entry.is_error and entry.error_message):
        state.error_count = 0
        state.error_alerted = False
        return
    message_hash = text_hash(entry.error_message)
    if message_hash == state.error_hash and state.error_count:
        state.error_count += 1
    else:
        state.error_hash, state.error_count, state.error_alerted = message_hash, 1, False
    if state.error_count >= ERROR_LOOP_LENGTH and not state.error_alerted:
        state.error_alerted = True
        ctx.alert(
            kinds.ERROR_LOOP,
            f"{state.error_count} replies in a row failed with the same error",
            evidence={"count": state.error_count, "error_hash": f"{message_hash:016x}"},
        )


# `retried_prompt` keeps the user message that opened the turn until a reply that is not an
# empty failure; `consecutive_assistant` the turn's latest model reply.


def open_turn(state: SessionState, entry: Entry) -> None:
    state.reply_id = None
    text = entry.exact_text_hash
    if text:
        state.retry_hash, state.retry_id, state.retry_failed = text, entry.id, False
    else:
        _forget_retry(state)


def note_reply(state: SessionState, entry: Entry) -> bool:
    """A kept model reply; True for an empty failure, which keeps the turn's prompt open for a
    retry (and a heartbeat turn as it was)."""
    if entry.is_error and not entry.text_hash and not entry.has_tool_calls:
        state.retry_failed = bool(state.retry_hash)
        return True
    if state.retry_hash:
        _forget_retry(state)
    return False


def note_tool_result(state: SessionState) -> None:
    if state.retry_hash:
        _forget_retry(state)


def _forget_retry(state: SessionState) -> None:
    state.retry_hash, state.retry_id, state.retry_failed = 0, None, False
