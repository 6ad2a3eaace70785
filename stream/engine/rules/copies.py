"""Every drop rule, grouped by the evidence a copy leaves, in the order they are tried.

A new rule goes into the module of the evidence it reads (a rule is a function that module's
`find` calls, its `DropRule` in its `RULES`, both at the place it is tried), and its definition
into the registry of alert kinds (stream/engine/kinds.py), at the same place:

- `keys`: the same input delivered twice (an idempotency key, OpenClaw's key grammar);
- `identities`: the same message carrying the same identity (a provider's response id, tool
  call ids, the channel's message id), wherever it hangs;
- `payload`: the same message persisted twice (its payload byte for byte, where it hangs);
- `correlation`: a copy that says what it copies (a mirror's source, parent link, run id);
- `repetition`: a repetition inside a turn (equal final text where OpenClaw's writers copy).

The same entry delivered again (`identity`: `redelivery`, `rewritten_in_place`) comes first;
a kept entry's detections are the engine's `_keep`. The order of the evidences is the order
here: keys, identities and payload are read before any text, so they never cost a text hash.
"""

from __future__ import annotations

from typing import Final

from stream.engine.context import Context
from stream.engine.rules import (
    correlation,
    identities,
    identity,
    keys,
    payload,
    repetition,
    replies,
)
from stream.engine.rules.drops import Drop, DropRule

RULES: Final[tuple[DropRule, ...]] = (
    *identity.RULES,
    *keys.RULES,
    *identities.RULES,
    *payload.RULES,
    *correlation.RULES,
    *repetition.RULES,
)
DROP_RULES: Final = {rule.name: rule for rule in RULES}


def find_copy(ctx: Context) -> Drop | None:
    """The first drop of an entry that is not a redelivery. Every assistant entry that reaches
    the text evidences counts toward `duplicate_storm`, dropped by them or kept."""
    drop = keys.find(ctx)
    if drop is None:
        drop = identities.find(ctx)
    if drop is None:
        drop = payload.find(ctx)
    if drop is not None:
        return drop
    drop = correlation.find(ctx)
    if drop is None:
        drop = repetition.find(ctx)
    if ctx.entry.role == "assistant":
        replies.duplicate_storm(ctx, drop is not None)
    return drop
