"""Run the cleaning engine from its Python source even where a compiled build is installed.

`SESSION_STREAM_PURE_PYTHON=1` installs the engine uncompiled (setup.py); set at run time, it
makes this process import the `.py` files beside the compiled modules instead. The CI runs the
engine's tests this way too, and the benchmark profiles the source, which cProfile can see.
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
COMPILED_PACKAGE = "stream.engine"


def requested() -> bool:
    return os.environ.get(ENV) == "1"


def is_compiled(module: ModuleType) -> bool:
    return isinstance(getattr(module, "__loader__", None), ExtensionFileLoader)


def source_of(compiled: Path) -> Path:
    """`engine.py` for `engine.cpython-311-x86_64-linux-gnu.so`."""
    return compiled.with_name(compiled.name.split(".", 1)[0] + ".py")


class _SourceFirst(MetaPathFinder):
    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None,
                  ) -> ModuleSpec | None:
        if name != COMPILED_PACKAGE and not name.startswith(COMPILED_PACKAGE + "."):
            return None
        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.origin is None or not isinstance(spec.loader, ExtensionFileLoader):
            return spec
        return spec_from_file_location(
            name, source_of(Path(spec.origin)),
            submodule_search_locations=spec.submodule_search_locations,
        )


def prefer_source() -> None:
    if not any(isinstance(finder, _SourceFirst) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SourceFirst())
