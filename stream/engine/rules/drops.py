"""The drop rules' shared shape: which rule matched, what it duplicates, and its one alert."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stream.engine.context import Context
from stream.engine.entry import Entry
from stream.engine.records import Action, Alert, Severity


@dataclass(frozen=True, slots=True)
class DropRule:
    name: str
    severity: Severity
    describe: str
    evidence: Callable[[Entry], dict]
    # Its copies take the place of the entry they repeat: what hangs below one is re-parented
    # to that entry, not to the copy's nearest kept ancestor.
    stands_in: bool = False


@dataclass(frozen=True, slots=True)
class Drop:
    rule: DropRule
    related: str | None
    # This copy takes the place of `related`, whatever its rule (see DropRule.stands_in).
    stands_in: bool = False


def drop_alert(ctx: Context, drop: Drop) -> Alert:
    """The one alert of a dropped entry; a function of the entry alone, so replays rebuild it."""
    return ctx.alert(
        drop.rule.name,
        drop.rule.severity,
        f"dropped {ctx.entry.id}: {drop.rule.describe} {drop.related}",
        evidence=drop.rule.evidence(ctx.entry),
        related=drop.related,
        action=Action.DROPPED,
    )


def text_evidence(entry: Entry) -> dict:
    return {"text_hash": f"{entry.text_hash:016x}", "role": entry.role}
