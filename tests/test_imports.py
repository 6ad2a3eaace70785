"""Imports in `stream/` run one way: no module imports a module that imports it back, directly or
through others, and no import inside a function hides such a loop (it counts as if it stood at
the top). `stream/engine/` counts as one module here: its own layout is its own."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE = "stream.engine"


def module_names() -> dict[str, Path]:
    names = {}
    for path in (ROOT / "stream").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _node(name: str) -> str:
    return ENGINE if name == ENGINE or name.startswith(ENGINE + ".") else name


def import_graph() -> dict[str, set[str]]:
    """Module → the modules of `stream` it imports, anywhere in its text."""
    names = module_names()
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported: list[str] = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, *([base] if base else [])])
                imported += [f"{base}.{alias.name}" if f"{base}.{alias.name}" in names else base
                             for alias in node.names]
        edges = graph.setdefault(_node(name), set())
        edges.update(_node(target) for target in imported if target in names)
        edges.discard(_node(name))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_graph_sees_the_modules_and_their_imports() -> None:
    graph = import_graph()
    assert "stream.sources.publish" in graph["stream.commands.publishing"]
    assert ENGINE in graph["stream.commands.clean"]
    assert "stream.worker.run" in graph["stream.commands.worker"]  # imported inside main()


def test_no_module_imports_itself_back() -> None:
    assert cycles(import_graph()) == []


def test_a_loop_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
