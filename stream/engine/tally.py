"""Counts of what the engine decided: the accounting identity every adapter reports."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from stream.engine import Action, Verdict


@dataclass
class Tally:
    entries_in: int = 0
    kept: int = 0
    dropped: int = 0
    dead_lettered: int = 0
    dropped_by_rule: Counter[str] = field(default_factory=Counter)
    alerts_by_kind: Counter[str] = field(default_factory=Counter)
    alerts_by_kind_severity: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, verdict: Verdict) -> None:
        self.entries_in += 1
        if verdict.action is Action.KEPT:
            self.kept += 1
        elif verdict.action is Action.DROPPED:
            self.dropped += 1
            self.dropped_by_rule[verdict.drop_rule or "unknown"] += 1
        else:
            self.dead_lettered += 1
        for alert in verdict.alerts:
            self.alerts_by_kind[alert.kind] += 1
            self.alerts_by_kind_severity[alert.kind, alert.severity.value] += 1

    def balanced(self) -> bool:
        return self.entries_in == self.kept + self.dropped + self.dead_lettered

    def as_json(self) -> dict:
        return {
            "entries_in": self.entries_in,
            "kept": self.kept,
            "dropped": self.dropped,
            "dead_lettered": self.dead_lettered,
            "dropped_by_rule": dict(sorted(self.dropped_by_rule.items())),
            "alerts_by_kind": dict(sorted(self.alerts_by_kind.items())),
        }

    def summary(self) -> str:
        lines = [
            f"entries in {self.entries_in}: kept {self.kept}, dropped {self.dropped}, "
            f"dead-lettered {self.dead_lettered}"
        ]
        lines += [f"  dropped {rule}: {n}" for rule, n in sorted(self.dropped_by_rule.items())]
        lines += [f"  alert {kind}: {n}" for kind, n in sorted(self.alerts_by_kind.items())]
        return "\n".join(lines)
