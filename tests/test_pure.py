"""The engine under test is the one that runs: compiled from the current sources, or the
source itself when `SESSION_STREAM_PURE_PYTHON=1` asks for it (the CI runs both)."""

from __future__ import annotations

import sys
from pathlib import Path

from stream import pure
from stream.engine import engine


def test_the_engine_is_compiled_unless_its_source_is_asked_for():
    assert pure.is_compiled(engine) is not pure.requested(), (
        "install with `make` (compiles the engine) or set SESSION_STREAM_PURE_PYTHON=1"
    )


def test_no_compiled_module_is_older_than_its_source():
    stale = []
    for name, module in list(sys.modules.items()):
        if name.startswith("stream.engine") and pure.is_compiled(module):
            compiled = Path(module.__file__)
            if pure.source_of(compiled).stat().st_mtime > compiled.stat().st_mtime:
                stale.append(name)
    assert not stale, f"rebuild the engine (`make test` does): {stale} older than their sources"
