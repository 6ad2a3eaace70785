"""The alert schema's kinds and docs/rules.md's catalogue tables, generated from the registry of
alert kinds (stream/engine/kinds.py), as a reference generated from the definitions it
documents cannot drift from them:

    python -m stream.catalogue            # exit 1, naming the files that differ
    python -m stream.catalogue --write    # rewrite them

Only the generated parts are rewritten: the schema's `kind` enum, its description and the
per-kind `allOf`, and the tables between the markers of docs/rules.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stream.engine.kinds import ENTRY, KINDS, SESSION, AlertKind
from stream.engine.records import Action

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "schemas" / "alert.schema.json"
RULES = ROOT / "docs" / "rules.md"
DROPPED_TABLE = "drop-rules"
OTHER_TABLE = "other-kinds"


def kind_list() -> str:
    return "The rule that raised the alert. " + " ".join(
        f"`{kind.name}` ({_severities(kind)}, {kind.action}): {kind.description}."
        for kind in KINDS)


def _severities(kind: AlertKind) -> str:
    return kind.severity if kind.raised is None else f"{kind.severity}/{kind.raised[0]}"


def constraints(kind: AlertKind) -> dict:
    """The schema's `allOf` clause of one kind."""
    properties: dict = {
        "severity": {"const": kind.severity.value,
                     "description": f"{kind.name} is always {kind.severity}."},
        "action": {"const": kind.action.value,
                   "description": f"{kind.name} always has action {kind.action}."},
        "evidence": {
            "required": [field.name for field in kind.evidence],
            "properties": {field.name: {**field.schema, "description": field.description}
                           for field in kind.evidence},
            "description": f"Evidence of {kind.name}.",
        },
    }
    if kind.about == ENTRY:
        properties["entry_id"] = {"type": "string",
                                  "description": f"The entry {kind.name} is about."}
    elif kind.about == SESSION:
        properties["entry_id"] = {
            "type": "null",
            "description": f"{kind.name} is about the session, not one entry: no entry_id (so "
                           "an entry dropped at the same moment carries only its drop alert)."}
        properties["related_entry_id"] = {"type": "string",
                                          "description": f"The entry that raised {kind.name}."}
    else:
        properties["entry_id"] = {"type": "null",
                                  "description": "A dead-lettered record has no usable entry id."}
        properties["related_entry_id"] = {
            "type": "null", "description": "A dead-lettered record relates to no entry."}
    then: dict = {"description": kind.alert, "properties": properties}
    if kind.raised is not None:
        raised, flag = kind.raised
        properties["severity"] = {
            "enum": [kind.severity.value, raised.value],
            "description": f"{kind.name}: {kind.severity}, or {raised} when `{flag}` is true."}
        then["if"] = {"properties": {"evidence": {"properties": {flag: {"const": True}}}}}
        then["then"] = {"properties": {"severity": {
            "const": raised.value,
            "description": f"{raised.capitalize()} when `{flag}` is true."}}}
        then["else"] = {"properties": {"severity": {
            "const": kind.severity.value,
            "description": f"{kind.severity.capitalize()} when `{flag}` is false."}}}
    return {"if": {"properties": {"kind": {"const": kind.name}}, "required": ["kind"]},
            "then": then}


def schema(committed: dict) -> dict:
    """The committed alert schema with its generated parts made anew."""
    made = json.loads(json.dumps(committed))
    made["properties"]["kind"] = {"enum": [kind.name for kind in KINDS],
                                  "description": kind_list()}
    made["allOf"] = [constraints(kind) for kind in KINDS]
    return made


def schema_text(committed: str) -> str:
    return json.dumps(schema(json.loads(committed)), indent=2, ensure_ascii=False) + "\n"


def table(kinds: list[AlertKind], with_action: bool) -> str:
    head = "| kind | evidence | severity |" + (" action |" if with_action else "")
    lines = [head + " raised when |", "|---" * (head.count("|")) + "|"]
    for kind in kinds:
        action = f" {kind.action} |" if with_action else ""
        severity = kind.severity.value if kind.raised is None else (
            f"{kind.severity} ({kind.raised[0]} when `{kind.raised[1]}`)")
        lines.append(f"| `{kind.name}` | {kind.family} | {severity} |{action} "
                     f"{kind.definition} |")
    return "\n".join(lines)


def tables() -> dict[str, str]:
    """The generated tables of docs/rules.md, by the name of their markers."""
    return {
        DROPPED_TABLE: table([kind for kind in KINDS if kind.action == Action.DROPPED], False),
        OTHER_TABLE: table([kind for kind in KINDS if kind.action != Action.DROPPED], True),
    }


def rules_text(committed: str) -> str:
    text = committed
    for name, made in tables().items():
        start, end = f"<!-- {name} -->\n", f"<!-- /{name} -->"
        before, rest = text.split(start, 1)
        _, after = rest.split(end, 1)
        text = before + start + made + "\n" + end + after
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stream.catalogue", description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite the generated parts")
    args = parser.parse_args(argv)
    stale = []
    for path, make in ((SCHEMA, schema_text), (RULES, rules_text)):
        committed = path.read_text(encoding="utf-8")
        made = make(committed)
        if made != committed:
            stale.append(path)
            if args.write:
                path.write_text(made, encoding="utf-8")
    if stale and not args.write:
        names = ", ".join(str(path.relative_to(ROOT)) for path in stale)
        print(f"{names}: not what the registry of alert kinds generates; "
              "run python -m stream.catalogue --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
