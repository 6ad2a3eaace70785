"""The modules under test are the ones that run: compiled from the current sources, or the
source itself when `SESSION_STREAM_PURE_PYTHON=1` asks for it (the CI runs both)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from stream import pure

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", [*pure.COMPILED, "stream.engine.rules.repetition"])
def test_the_compiled_modules_are_compiled_unless_their_source_is_asked_for(name):
    module = importlib.import_module(name)
    assert pure.is_compiled(module) is not pure.requested(), (
        "install with `make` (compiles the engine and the worker's per-record path) or set "
        "SESSION_STREAM_PURE_PYTHON=1"
    )


def test_no_compiled_module_is_older_than_its_source():
    stale = []
    for name, module in list(sys.modules.items()):
        if pure.is_compiled_name(name) and pure.is_compiled(module):
            compiled = Path(module.__file__)
            if pure.source_of(compiled).stat().st_mtime > compiled.stat().st_mtime:
                stale.append(name)
    assert not stale, f"rebuild them (`make test` does): {stale} older than their sources"


def test_the_compiled_sources_are_the_named_modules():
    sources = {path.relative_to(ROOT) for path in pure.compiled_sources(ROOT)}
    assert Path("stream/engine/rules/repetition.py") in sources
    assert Path("stream/worker/processor.py") in sources
    assert Path("stream/cli.py") not in sources
    assert all(path.is_file() for path in pure.compiled_sources(ROOT))
