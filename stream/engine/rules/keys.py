"""Evidence: the same input delivered twice. A message carries the idempotency key its writer
gave the input (`idempotencyKey`, or `__openclaw.idempotencyKey`); OpenClaw's key grammar says
which keys name one delivery: `idempotent_replay`,
`announce_retry_duplicate` and `codex_prompt_mirror`.

A rule of this evidence is a function `(ctx, key_use) -> Drop | None` that `find` tries in
order once the message's own key found no earlier message with its content; its
`DropRule` goes into `RULES` at the same place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from stream.engine import kinds
from stream.engine.context import Context
from stream.engine.entry import Entry, positional_scope
from stream.engine.rules.drops import Drop, DropRule
from stream.engine.state import USER
from stream.engine.stored import ASSISTANT_KEY, KEY, OPENER, POSITIONAL_KEY, TOOL_RESULT_KEY

IDEMPOTENT_REPLAY: Final[DropRule] = DropRule(
    kinds.IDEMPOTENT_REPLAY,
    "same idempotency identity and content as entry",
    lambda entry: {
        "idempotency_key": entry.idempotency_key,
        "positional": positional_scope(entry.idempotency_key or "") is not None,
    },
)
ANNOUNCE_RETRY_DUPLICATE: Final[DropRule] = DropRule(
    kinds.ANNOUNCE_RETRY_DUPLICATE,
    "retried delivery of the same announce repeats entry",
    lambda entry: {"idempotency_key": entry.idempotency_key},
)
CODEX_PROMPT_MIRROR: Final[DropRule] = DropRule(
    kinds.CODEX_PROMPT_MIRROR,
    "the run's prompt written again by its other writer, as entry",
    lambda entry: {"idempotency_key": entry.idempotency_key},
    stands_in=True,
)

# Where a key's first message is remembered. OpenClaw looks a key up per role: an assistant
# row among assistants (`scan-assistant`, written `preserve-owner`), so a run's reply may carry
# its user turn's key while the user row stays the key's owner (#154253). Users keep `KEY`, the
# slot stored states already hold.
_KEY_SLOTS: Final = {"assistant": ASSISTANT_KEY, "toolResult": TOOL_RESULT_KEY}

# OpenClaw's Codex transcript mirror keys a message `codex-app-server:<threadId>:<identity>`,
# the run's prompt with the identity `<turnId>:prompt` (`attachCodexMirrorIdentity`). Its
# dedupe reads only top-level keys, so a prompt the HTTP API already wrote keyed under
# `__openclaw` is written again (#141233).
_CODEX_SCOPE: Final = "codex-app-server:"
_PROMPT: Final = ":prompt"
# The keyed user message that opened the current turn (stored.OPENER) is current while its seq
# is the turn's.


def key_slot(role: str | None, key: str) -> str:
    return _KEY_SLOTS.get(role or "", KEY) + key


def _is_codex_prompt(key: str) -> bool:
    return key.startswith(_CODEX_SCOPE) and key.endswith(_PROMPT)

# OpenClaw's key grammar (read in 2026.9.6): a subagent announce or settle wake is keyed
# `announce:<base>[:yield-N]` (`buildAnnounceIdempotencyKey`) and a retry of the same
# delivery `…:retry-N` (the requester-settle wake rotates it per attempt); that key is also the
# run id of the turn it starts, whose user message is keyed `<runId>:user`
# (`buildRunUserTurnIdempotencyKey`) and whose aborted partial reply `<runId>:assistant`
# (`captureAbortedPartial`). So a retried wake's user turn ends `:retry-N:user`, and its first
# attempt's key is the same without `:retry-N`.
_ANNOUNCE_RETRY: Final = re.compile(
    r"^(?P<base>announce:.+):retry-[1-9][0-9]*(?P<turn>:user|:assistant)?$"
)


@dataclass(slots=True)
class KeyUse:
    """What a message's idempotency key leaves behind, applied only if the message is kept:
    a dropped message must leave no trace, or cleaning a cleaned session would differ."""

    key: str
    slot: str
    fingerprint: int
    identity: str | None
    collides_with: str | None

    def apply(self, ctx: Context) -> None:
        entry = ctx.entry
        if self.collides_with is not None:
            ctx.alert(
                kinds.IDEMPOTENCY_KEY_COLLISION,
                f"kept {entry.id}: idempotency key reused by entry {self.collides_with} "
                "with other content",
                evidence={"idempotency_key": self.key, "positional": self.identity is not None},
                related=self.collides_with,
            )
        if self.identity is not None:
            ctx.remember(self.identity, [entry.id])
        ctx.remember(self.slot, [self.fingerprint, entry.id])
        if entry.role == "user":
            ctx.remember(OPENER, [self.fingerprint, entry.id, _is_codex_prompt(self.key)])


def find(ctx: Context) -> Drop | None:
    """The first rule of this evidence that drops the message; a kept keyed message leaves
    its key's use in `ctx.key_use`, for the engine to apply once the message is kept."""
    replayed = idempotent_replay(ctx)
    if replayed is None or isinstance(replayed, Drop):
        return replayed
    ctx.key_use = replayed
    return announce_retry(ctx, replayed) or codex_prompt_mirror(ctx, replayed)


def idempotent_replay(ctx: Context) -> Drop | KeyUse | None:
    """A Drop for a replayed message; else what its key leaves behind if it is kept."""
    entry = ctx.entry
    key = entry.idempotency_key
    if key is None:
        return None
    fingerprint = entry.content_fingerprint
    positional = positional_scope(key)
    identity = None
    if positional is not None:
        _note_positional_keys(ctx, key)
        scope, role = positional
        identity = f"{POSITIONAL_KEY}{scope}\x00{role}\x00{fingerprint:x}"
        seen = ctx.recall(identity)
        if seen is not None and seen[1] != entry.id:
            return _replay_of(entry, seen[1])
    slot = key_slot(entry.role, key)
    previous = ctx.recall(slot)
    collides_with = None
    if previous is not None and previous[2] != entry.id:
        if previous[1] == fingerprint:
            return _replay_of(entry, previous[2])
        collides_with = previous[2]
    return KeyUse(key, slot, fingerprint, identity, collides_with)


def _replay_of(entry: Entry, original: str) -> Drop:
    """An input delivered again takes its original's place: the reply to a second delivery
    (#126680) answers the original, below it, and not below the reply to the first, where it
    would look like that reply's delivery receipt (`cleaned_child_duplicate`) to every later
    cleaning."""
    return Drop(IDEMPOTENT_REPLAY, original, entry.role == "user")


def announce_retry(ctx: Context, key_use: KeyUse) -> Drop | None:
    """A retried announce delivery: its key is the first attempt's with a `:retry-N` suffix
    (rotated so that a transport's cached failure cannot stand in for the new attempt), before
    the `:user` or `:assistant` of the run's message, and its role and content are the first
    attempt's. Other content under a retried key is kept."""
    if not key_use.key.startswith("announce:"):
        return None
    match = _ANNOUNCE_RETRY.match(key_use.key)
    if match is None:
        return None
    first = ctx.recall(key_slot(ctx.entry.role, match["base"] + (match["turn"] or "")))
    if first is not None and first[1] == key_use.fingerprint and first[2] != ctx.entry.id:
        return Drop(ANNOUNCE_RETRY_DUPLICATE, first[2])
    return None


def codex_prompt_mirror(ctx: Context, key_use: KeyUse) -> Drop | None:
    """A run's prompt written by both of its writers (#141233): the HTTP API's row keyed under
    `__openclaw`, and the Codex mirror's keyed `codex-app-server:…:<turnId>:prompt`, in either
    order, with one role and content, the later directly after the earlier: both are written
    before the run's first reply. The mirror writes one prompt per turn, so two of its prompts
    with the same words are two runs; a prompt after a reply, or whose turn was opened by an
    unkeyed message, may be a person's words again: kept."""
    state = ctx.state
    if ctx.entry.role != "user" or state.last_role != USER:
        return None
    opener = ctx.recall(OPENER)
    if (
        opener is None
        or opener[0] != state.turn_seq
        or opener[2] != state.last_id
        or opener[2] == ctx.entry.id
    ):
        return None
    if opener[3] == _is_codex_prompt(key_use.key) or opener[1] != key_use.fingerprint:
        return None
    return Drop(CODEX_PROMPT_MIRROR, opener[2])


def _note_positional_keys(ctx: Context, key: str) -> None:
    if ctx.state.positional_alerted:
        return
    ctx.state.positional_alerted = True
    ctx.alert(
        kinds.POSITIONAL_IDEMPOTENCY_KEY,
        "session uses positional idempotency keys (scope:role:index), which shift "
        "when a snapshot changes; deduplicating them by scope, role and content",
        evidence={"idempotency_key": key},
        related=ctx.entry.id,
    )


RULES: Final[tuple[DropRule, ...]] = (
    IDEMPOTENT_REPLAY,
    ANNOUNCE_RETRY_DUPLICATE,
    CODEX_PROMPT_MIRROR,
)
