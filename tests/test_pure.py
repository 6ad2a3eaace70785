"""The modules under test are the ones that run: compiled from the current sources, or the
source itself when `SESSION_STREAM_PURE_PYTHON=1` asks for it (the CI runs both)."""

from __future__ import annotations

import importlib
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from stream import pure
from stream.engine import Action, Engine, Memory, Session, SessionState
from tests.support.builders import assistant, encode, header, process

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", pure.compiled_names(ROOT))
def test_the_compiled_modules_are_compiled_unless_their_source_is_asked_for(name):
    module = importlib.import_module(name)
    assert pure.is_compiled(module) is not pure.requested(), (
        "install with `make` (compiles the engine and the worker's per-record path) or set "
        "SESSION_STREAM_PURE_PYTHON=1"
    )


def test_no_compiled_module_is_older_than_its_source():
    # mypyc gives a compiled module the __file__ it would have beside its source; the file
    # that was loaded is in the _compiled folder
    stale = []
    for source in pure.compiled_sources(ROOT):
        compiled = source.parent / pure.FOLDER / (source.stem + EXTENSION_SUFFIXES[0])
        if compiled.exists() and source.stat().st_mtime > compiled.stat().st_mtime:
            stale.append(str(source.relative_to(ROOT)))
    assert not stale, f"rebuild them (`make test` does): {stale} newer than their compiled form"


def test_no_extension_module_sits_beside_a_source_it_would_shadow():
    # the layout before the _compiled folders: such a file runs even when the source is asked for
    beside = [path for path in (ROOT / "stream").rglob("*.so") if path.parent.name != pure.FOLDER]
    assert not beside, f"remove them (`make` does): {beside}"


def test_the_packages_choosing_are_the_ones_compiled_into():
    packages = {name.rpartition(".")[0] for name in pure.compiled_names(ROOT)}
    assert packages == {"stream.engine", "stream.engine.rules", "stream.worker"}
    for package in packages:
        init = (ROOT / Path(*package.split(".")) / "__init__.py").read_text()
        # one call into stream/pure.py (the engine's two packages still spell it out)
        assert ("pure.search_path(__name__, __path__)" in init
                or f"from {package} import _compiled" in init)


def test_the_compiled_sources_are_the_named_modules():
    sources = {path.relative_to(ROOT) for path in pure.compiled_sources(ROOT)}
    assert Path("stream/worker/processor.py") in sources
    assert Path("stream/engine/engine.py") in sources
    assert Path("stream/engine/__init__.py") not in sources  # it makes the choice
    assert Path("stream/cli.py") not in sources
    assert all(path.is_file() for path in pure.compiled_sources(ROOT))


class _PlainMemory(Memory):
    """A Memory written in Python, as an adapter outside this package would write one."""

    def __init__(self) -> None:
        self.values: dict[str, list] = {}

    def get(self, key: str) -> list | None:
        return self.values.get(key)

    def put(self, key: str, value: list) -> None:
        self.values[key] = value


def test_a_memory_written_in_python_serves_the_engine_compiled_or_not():
    memory = _PlainMemory()
    session = Session("s1", SessionState(), memory)
    reply = encode([assistant("Done.", idempotency_key="k1")])[0]
    lines = [encode([header()])[0], reply, reply.replace(b'"id":"', b'"id":"x', 1)]
    verdicts = process(Engine(), session, lines)
    assert [v.action for v in verdicts] == [Action.KEPT, Action.KEPT, Action.DROPPED]
    assert verdicts[2].drop_rule == "idempotent_replay"
    assert any(key.startswith("e:") for key in memory.values)
