"""Which modules the install compiles, and the switch that runs their Python source instead.

The install (setup.py) compiles the modules of COMPILED with mypyc into a `_compiled` folder
in their package; each package's `__init__` makes the choice where it is imported, as
aiokafka does for its extensions: the `_compiled` folder is searched first, unless
`SESSION_STREAM_PURE_PYTHON=1` is set, and when it is missing (an install without a C
compiler, or with that variable set at install time) the import fails and the source runs.
The test suite runs both ways (`make test-pure`), and so does the benchmark's source run,
which cProfile can see into.
"""

from __future__ import annotations

import importlib
import os
from importlib.machinery import ExtensionFileLoader
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
# where, in each package, the compiled modules are installed
FOLDER = "_compiled"


def requested() -> bool:
    return os.environ.get(ENV) == "1"


def search_path(package: str, path: list[str]) -> list[str]:
    """The `__path__` a package of COMPILED sets in its `__init__`: its `_compiled` folder
    first, unless SESSION_STREAM_PURE_PYTHON=1 asks for the source or there is none (no C
    compiler at install), then `path`, its own folder."""
    if requested():
        return path
    try:
        compiled = importlib.import_module(f"{package}.{FOLDER}")
    except ImportError:
        return path
    return [*compiled.__path__, *path]


def is_compiled(module: ModuleType) -> bool:
    return isinstance(getattr(module, "__loader__", None), ExtensionFileLoader)


def compiled_sources(root: Path) -> list[Path]:
    """The source files of the COMPILED modules under the project folder `root`; a package's
    `__init__` is left as Python, as it chooses between them and their source."""
    sources: list[Path] = []
    for module in COMPILED:
        path = root.joinpath(*module.split("."))
        sources += sorted(p for p in path.rglob("*.py") if p.name != "__init__.py") \
            if path.is_dir() else [path.with_suffix(".py")]
    return sources


def compiled_names(root: Path) -> list[str]:
    """The module names of `compiled_sources`."""
    return [".".join(path.relative_to(root).with_suffix("").parts)
            for path in compiled_sources(root)]


if __name__ == "__main__":
    print(*compiled_sources(Path(".")))
