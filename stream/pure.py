"""Which modules the install compiles, and running them from their Python source instead.

`SESSION_STREAM_PURE_PYTHON=1` installs them uncompiled (setup.py). A compiled install runs
the compiled modules; a program that wants their source anyway asks for it explicitly, before
it imports them, with `use_source_if_requested()`: the test suite does (`make test-pure` runs
the compiled modules' tests on their source) and so does the benchmark's source run, which
cProfile can see into. Importing `stream` changes nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ExtensionFileLoader, ModuleSpec, PathFinder
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType

ENV = "SESSION_STREAM_PURE_PYTHON"
# The engine, and the worker's per-record path around it. setup.py reads this list and the
# Makefile runs this file for it: it imports only the standard library.
COMPILED = (
    "stream.engine",
    "stream.worker.codec",
    "stream.worker.processor",
    "stream.worker.tables",
)


def requested() -> bool:
    return os.environ.get(ENV) == "1"


def is_compiled(module: ModuleType) -> bool:
    return isinstance(getattr(module, "__loader__", None), ExtensionFileLoader)


def is_compiled_name(name: str) -> bool:
    return any(name == module or name.startswith(module + ".") for module in COMPILED)


def compiled_sources(root: Path) -> list[Path]:
    """The source files of the COMPILED modules under the project folder `root`."""
    sources: list[Path] = []
    for module in COMPILED:
        path = root.joinpath(*module.split("."))
        sources += sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    return sources


def source_of(compiled: Path) -> Path:
    """`engine.py` for `engine.cpython-311-x86_64-linux-gnu.so`."""
    return compiled.with_name(compiled.name.split(".", 1)[0] + ".py")


class _SourceFirst(MetaPathFinder):
    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None,
                  ) -> ModuleSpec | None:
        if not is_compiled_name(name):
            return None
        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.origin is None or not isinstance(spec.loader, ExtensionFileLoader):
            return spec
        return spec_from_file_location(
            name, source_of(Path(spec.origin)),
            submodule_search_locations=spec.submodule_search_locations,
        )


def use_source_if_requested() -> None:
    """With SESSION_STREAM_PURE_PYTHON=1, this process imports the compiled modules from the
    `.py` files beside them; call it before anything imports them."""
    if requested() and not any(isinstance(finder, _SourceFirst) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SourceFirst())


if __name__ == "__main__":
    print(*compiled_sources(Path(".")))
