"""Each rule owns the turn state it reads: a field of `SessionState` is written by its owner
alone (the engine's turn, or one rule module), wherever it is stored (its place in the stored
list is a stored format, stream/engine/stored.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from stream.engine.state import FIELD_NAMES

ENGINE = Path(__file__).resolve().parents[2] / "stream" / "engine"
_TURN = ("engine", "state")
OWNERS: dict[str, tuple[str, ...]] = {
    **{name: _TURN for name in (
        "seq", "origin", "position", "start", "turn_seq", "latest_text_hash", "latest_text_id",
        "latest_is_mirror", "latest_mirrored", "last_role", "last_text_hash", "last_id")},
    "positional_alerted": ("rules/keys",),
    **{name: ("rules/repetition",) for name in (
        "prev_id", "prev_text_hash", "prev_model_hash", "prev_thinking", "prev_usage_hash",
        "prev_plain", "parts_crc", "parts_length", "parts_count", "last_cli", "latest_cli")},
    **{name: ("rules/replies",) for name in (
        "reply_id", "reply_thinking", "reply_error", "storm_window", "storm_armed",
        "storm_clean", "think_count", "think_last", "think_alerted", "error_hash",
        "error_count", "error_alerted", "retry_hash", "retry_id", "retry_failed")},
    "pending_calls": ("rules/structure",),
    **{name: ("rules/heartbeat",) for name in (
        "heartbeat_hash", "heartbeat_id", "heartbeat_silent")},
    **{name: ("rules/wakes",) for name in ("announce_hash", "announce_id", "announce_key")},
    **{name: ("rules/correlation",) for name in (
        "turn_sent", "person_seq", "person_answered")},
}


def _written(tree: ast.AST) -> set[str]:
    """The attribute names a module assigns to, `x.name = …` (in tuples too) or `x.name += …`,
    or appends to (`x.name.append(…)`)."""
    names: set[str] = set()

    def targets(node: ast.AST) -> None:
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Tuple | ast.List):
            for element in node.elts:
                targets(element)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                targets(target)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets(node.target)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and isinstance(node.func.value, ast.Attribute)):
            names.add(node.func.value.attr)
    return names


def test_every_state_field_has_an_owner() -> None:
    assert set(OWNERS) == set(FIELD_NAMES)


def test_a_state_field_is_written_by_its_owner_alone() -> None:
    misplaced = []
    for path in sorted(ENGINE.rglob("*.py")):
        if "_compiled" in path.parts:
            continue
        module = path.relative_to(ENGINE).with_suffix("").as_posix()
        for name in _written(ast.parse(path.read_text())) & set(FIELD_NAMES):
            if module not in OWNERS[name]:
                misplaced.append(f"{module} writes {name}")

    assert misplaced == []
