"""The configuration reference is generated from the code and may not drift from it, and the
README's first two commands are the two (the rule catalogue: tests/test_catalogue.py)."""

from __future__ import annotations

from pathlib import Path

from stream.cli import build_parser
from stream.settings import OPTIONS, markdown_table

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"
RULES = ROOT / "docs" / "rules.md"


def test_the_configuration_table_equals_the_options_in_the_code() -> None:
    text = CONFIGURATION.read_text()
    table = text.split("<!-- options -->\n", 1)[1].split("\n<!-- /options -->", 1)[0]
    assert table == markdown_table()


def test_every_option_is_a_worker_flag() -> None:
    worker = build_parser()._subparsers._group_actions[0].choices["worker"]
    flags = {flag for action in worker._actions for flag in action.option_strings}
    assert {option.flag for option in OPTIONS} <= flags


def test_the_first_two_commands_are_run_and_test() -> None:
    commands = [line for line in README.read_text().splitlines() if line.startswith("make ")]
    assert [c.split()[1] for c in commands[:2]] == ["run", "test"]


def test_the_readme_is_a_guide_read_in_five_minutes() -> None:
    assert len(README.read_text().splitlines()) <= 150
