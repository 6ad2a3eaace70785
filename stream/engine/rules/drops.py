"""The drop rules' shared shape: which rule matched, what it duplicates, and its one alert."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stream.engine.context import Context
from stream.engine.entry import Entry
from stream.engine.kinds import AlertKind
from stream.engine.records import Alert


@dataclass(frozen=True, slots=True)
class DropRule:
    # its registered definition (stream/engine/kinds.py), whose action is `dropped`
    kind: AlertKind
    # what its alert's message says the copy is, before the id of the entry it repeats
    describe: str
    evidence: Callable[[Entry], dict]
    # Its copies take the place of the entry they repeat: what hangs below one is re-parented
    # to that entry, not to the copy's nearest kept ancestor.
    stands_in: bool = False

    @property
    def name(self) -> str:
        return self.kind.name


@dataclass(frozen=True, slots=True)
class Drop:
    rule: DropRule
    related: str | None
    # This copy takes the place of `related`, whatever its rule (see DropRule.stands_in).
    stands_in: bool = False


def drop_alert(ctx: Context, drop: Drop) -> Alert:
    """The one alert of a dropped entry; a function of the entry alone, so replays rebuild it."""
    return ctx.alert(
        drop.rule.kind,
        f"dropped {ctx.entry.id}: {drop.rule.describe} {drop.related}",
        evidence=drop.rule.evidence(ctx.entry),
        related=drop.related,
    )


def text_evidence(entry: Entry) -> dict:
    return {"text_hash": f"{entry.text_hash:016x}", "role": entry.role}
