"""Detection: a completion wake answered with the answer already given (#156070).

A subagent announce or a Codex-native completion callback starts a run keyed `announce:…`
(`buildAnnounceIdempotencyKey`; the callback's `announce:codex-native:<thread>:<child>:<status>`)
whose user turn is keyed `<runId>:user`. When the parent had already taken the child's result
(`wait_agent`) and answered, the model can answer the wake with that same final text again, and
the channel delivers it twice. That reply is a model call billed on its own, which a model may
make on purpose: it is kept, and reported once per wake.
"""

from __future__ import annotations

from typing import Final

from stream.engine import kinds
from stream.engine.context import Context
from stream.engine.entry import Entry
from stream.engine.state import SessionState

WAKE_PREFIX: Final = "announce:"


def repeated_answer(ctx: Context) -> None:
    state = ctx.state
    if not state.announce_hash:
        return
    entry = ctx.entry
    if entry.role != "assistant" or entry.is_mirror or not entry.text_hash:
        return
    if entry.reply_text_hash != state.announce_hash:
        return
    ctx.alert(
        kinds.REPEATED_ANSWER,
        f"kept {entry.id}: the reply to a completion wake repeats the answer "
        f"{state.announce_id} gave before it",
        evidence={"idempotency_key": state.announce_key},
        related=state.announce_id,
    )
    state.announce_hash = 0


def open_turn(state: SessionState, entry: Entry, earlier_hash: int,
              earlier_id: str | None) -> None:
    """A turn a completion wake opens (an `announce:` key) remembers what the turn before
    answered, and the wake's key, until a reply repeats it."""
    key = entry.idempotency_key
    if earlier_hash and key is not None and key.startswith(WAKE_PREFIX):
        state.announce_hash, state.announce_id, state.announce_key = earlier_hash, earlier_id, key
    else:
        state.announce_hash, state.announce_id, state.announce_key = 0, None, None
