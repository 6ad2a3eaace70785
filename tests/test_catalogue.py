"""The registry of alert kinds (stream/engine/kinds.py) is the one list of what the engine
raises: the alert schema's kinds and docs/rules.md's catalogue tables are what it generates
(`python -m stream.catalogue --write`), and every kind a rule raises is registered."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import stream.engine
import stream.engine.rules
from stream import catalogue
from stream.engine import DROP_RULES
from stream.engine.kinds import KINDS, AlertKind
from stream.engine.records import Action
from stream.engine.rules.copies import RULES
from stream.engine.rules.drops import DropRule

ROOT = Path(__file__).resolve().parents[1]
RULE_MODULES = ROOT / "stream" / "engine" / "rules"


def _engine_modules() -> list:
    names = [f"stream.engine.{info.name}" for info in pkgutil.iter_modules(stream.engine.__path__)
             if not info.name.startswith("_")]
    names += [f"stream.engine.rules.{info.name}"
              for info in pkgutil.iter_modules(stream.engine.rules.__path__)
              if not info.name.startswith("_")]
    return [importlib.import_module(name) for name in sorted(set(names))]


def test_the_alert_schema_is_what_the_registry_generates() -> None:
    committed = catalogue.SCHEMA.read_text(encoding="utf-8")

    assert catalogue.schema_text(committed) == committed, (
        "run python -m stream.catalogue --write")


def test_the_rule_catalogue_tables_are_what_the_registry_generates() -> None:
    committed = catalogue.RULES.read_text(encoding="utf-8")

    assert catalogue.rules_text(committed) == committed, "run python -m stream.catalogue --write"


def test_the_command_reports_a_stale_file_and_writes_nothing_without_write(
        monkeypatch, tmp_path: Path, capsys) -> None:
    stale = tmp_path / "alert.schema.json"
    stale.write_text(catalogue.SCHEMA.read_text().replace('"redelivery",', '"delivered",', 1))
    rules = tmp_path / "rules.md"
    rules.write_text(catalogue.RULES.read_text())
    monkeypatch.setattr(catalogue, "SCHEMA", stale)
    monkeypatch.setattr(catalogue, "RULES", rules)
    monkeypatch.setattr(catalogue, "ROOT", tmp_path)
    before = stale.read_text()

    assert catalogue.main([]) == 1
    assert "alert.schema.json" in capsys.readouterr().err
    assert stale.read_text() == before
    assert catalogue.main(["--write"]) == 0
    assert catalogue.main([]) == 0


def test_the_registry_lists_the_drop_rules_in_the_order_they_are_tried() -> None:
    assert [kind for kind in KINDS if kind.action == Action.DROPPED] == [
        rule.kind for rule in RULES]
    assert list(DROP_RULES) == [rule.name for rule in RULES]


def test_the_rule_catalogue_lists_the_drop_rules_in_the_order_they_are_tried() -> None:
    table = catalogue.RULES.read_text().split("<!-- drop-rules -->", 1)[1]
    table = table.split("<!-- /drop-rules -->", 1)[0]

    assert re.findall(r"^\| `([a-z_]+)`", table, re.MULTILINE) == list(DROP_RULES)


def test_every_kind_is_registered_once_under_an_evidence_the_engine_has() -> None:
    names = [kind.name for kind in KINDS]
    evidences = {path.stem for path in RULE_MODULES.glob("*.py")} | {"input"}

    assert len(set(names)) == len(names)
    assert {kind.family for kind in KINDS} <= evidences
    assert all(kind.description and kind.definition and kind.alert for kind in KINDS)
    assert all("\n" not in kind.description for kind in KINDS)


def test_every_kind_an_engine_module_holds_is_registered() -> None:
    registered = {id(kind) for kind in KINDS}
    held = []
    for module in _engine_modules():
        for value in vars(module).values():
            kind = value.kind if isinstance(value, DropRule) else value
            if isinstance(kind, AlertKind):
                held.append(kind)

    assert held and all(id(kind) in registered for kind in held)


def test_every_registered_kind_is_raised_by_the_engine() -> None:
    sources = "\n".join(path.read_text() for path in (ROOT / "stream" / "engine").rglob("*.py")
                        if path.name != "kinds.py")

    assert [kind.name for kind in KINDS
            if not re.search(rf"\b{kind.name.upper()}\b", sources)] == []


def test_no_rule_is_numbered_in_the_code_the_docs_the_readme_or_the_schema() -> None:
    # Numbers drifted (one rule ran before another numbered lower, one was renumbered): the
    # rules are named. The CHANGELOG's released sections are history and keep theirs.
    numbered = re.compile(r"\b(?:[Rr]ules?|[Dd]etections?) [0-9]{1,2}[a-z]?\b|\([0-9][a-z]\)")
    paths = [ROOT / "README.md", catalogue.SCHEMA, *(ROOT / "docs").glob("*.md"),
             *(ROOT / "stream").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    texts = {str(path.relative_to(ROOT)): path.read_text() for path in paths}
    changelog = (ROOT / "CHANGELOG.md").read_text()
    texts["CHANGELOG.md (unreleased)"] = changelog.split("\n## ", 2)[1]

    assert [name for name, text in texts.items() if numbered.search(text)] == []
