"""Nothing outside `stream/kafka/internals.py` reaches into Faust's or aiokafka's private API.

Read from the source: no private attribute of another object (`x._name`), and in a class
built on a Faust or aiokafka class, no private name of the base used, overridden or shadowed
(`self._name` that the class does not define itself, a `def _name` or `self._name = ...`
that the base already has: shadowing Faust's `App._producer` broke the worker once).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

STREAM = Path(__file__).resolve().parents[2] / "stream"
FENCE = STREAM / "kafka" / "internals.py"
FOREIGN = ("faust", "aiokafka", "mode")
# private names of the standard library the project uses on purpose
ALLOWED = {("os", "_exit"), ("argparse", "_SubParsersAction")}


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def foreign_names(tree: ast.Module) -> dict[str, str]:
    """Names bound to a Faust or aiokafka module or object, with the dotted path they name."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FOREIGN:
                    names[(alias.asname or alias.name).split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FOREIGN:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def resolve(dotted: str) -> object:
    module, _, rest = dotted.partition(".")
    value: object = importlib.import_module(module)
    for part in rest.split(".") if rest else []:
        try:
            value = getattr(value, part)
        except AttributeError:
            value = importlib.import_module(f"{value.__name__}.{part}")  # type: ignore[attr-defined]
    return value


def foreign_base(base: ast.expr, names: dict[str, str]) -> type | None:
    parts: list[str] = []
    while isinstance(base, ast.Attribute):
        parts.insert(0, base.attr)
        base = base.value
    if not isinstance(base, ast.Name) or base.id not in names:
        return None
    found = resolve(".".join([names[base.id], *parts]))
    return found if isinstance(found, type) else None


def reaches(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = foreign_names(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and private(node.attr)
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                and not (isinstance(node.value, ast.Name)
                         and (node.value.id, node.attr) in ALLOWED)):
            found.append(f"{path.name}:{node.lineno} .{node.attr}")
        if isinstance(node, ast.ClassDef):
            bases = [b for b in (foreign_base(base, names) for base in node.bases) if b]
            if bases:
                found += _class_reaches(path, node, bases)
    return found


def _class_reaches(path: Path, node: ast.ClassDef, bases: list[type]) -> list[str]:
    own = {item.name for item in node.body
           if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)}
    assignments = [item for item in ast.walk(node) if isinstance(item, ast.Assign | ast.AnnAssign)]
    assigned = {target.attr for item in assignments
                for target in (item.targets if isinstance(item, ast.Assign) else [item.target])
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id == "self"}
    in_base = {name for name in own | assigned if private(name)
               and any(hasattr(base, name) for base in bases)}
    found = [f"{path.name}:{node.lineno} {node.name} overrides or shadows {name}"
             for name in sorted(in_base)]
    for item in ast.walk(node):
        if (isinstance(item, ast.Attribute) and private(item.attr)
                and isinstance(item.value, ast.Name) and item.value.id == "self"
                and item.attr not in own | assigned):
            found.append(f"{path.name}:{item.lineno} {node.name} reads the base's {item.attr}")
    return found


def test_no_private_reach_outside_the_fence() -> None:
    found = [reach for path in sorted(STREAM.rglob("*.py")) if path != FENCE
             for reach in reaches(path)]
    assert not found, "move these behind stream/kafka/internals.py, each a touch point:\n" + (
        "\n".join(found))


def test_the_check_sees_a_reach(tmp_path: Path) -> None:
    source = tmp_path / "reach.py"
    source.write_text(
        "import faust\n"
        "class App(faust.App):\n"
        "    def _new_transport(self):\n"
        "        self._producer = None\n"
        "        return self._transport\n"
        "def lag(consumer):\n"
        "    return consumer._committed_offset\n")
    found = reaches(source)
    assert any("overrides or shadows _new_transport" in reach for reach in found)
    assert any("overrides or shadows _producer" in reach for reach in found)
    assert any("reads the base's _transport" in reach for reach in found)
    assert any("._committed_offset" in reach for reach in found)
