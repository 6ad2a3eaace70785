"""A clone of the repository is all a user has: no code, test or build file may read a path
outside the checkout (a data folder beside it, a developer's home layout)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.data import CORPUS, DATA, FIXTURES

ROOT = Path(__file__).resolve().parents[1]
# What is not the project's own text: environments, caches and the data itself.
SKIPPED_DIRS = {".git", ".venv", ".venv-quix", "__pycache__", ".pytest_cache", ".ruff_cache",
                ".hypothesis", ".session-stream", "build", "dist", "data", "results",
                "node_modules"}
CODE_SUFFIXES = {".py", ".sh", ".toml", ".cfg", ".yml", ".yaml", ".json", ".ini"}
CODE_NAMES = {"Makefile", "Dockerfile", "run"}
# Folders beside the checkout this project's history once read, and absolute workplace paths.
OUTSIDE = re.compile(r"\.\./shared|/\s*[\"']shared[\"']|[\"']/work/")
PARENTS = re.compile(r"\.parents\[(\d+)\]((?:\.parent)*)")
PARENT_CHAIN = re.compile(r"__file__\)(?:\.resolve\(\))?((?:\.parent)+)")


def project_files() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        relative = path.relative_to(ROOT)
        if any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in relative.parts):
            continue
        if path.is_file() and (path.suffix in CODE_SUFFIXES or path.name in CODE_NAMES):
            found.append(path)
    return sorted(found)


def escapes(relative: Path, line: str) -> bool:
    """A `Path(__file__)` parent chain that climbs above the repository root."""
    depth = len(relative.parts)  # parents[depth - 1] is the root
    levels = [int(k) + len(chain) // len(".parent") for k, chain in PARENTS.findall(line)]
    levels += [len(chain) // len(".parent") - 1 for chain in PARENT_CHAIN.findall(line)]
    return any(level >= depth for level in levels)


def test_no_file_names_a_path_outside_the_repository():
    offenders = []
    for path in project_files():
        relative = path.relative_to(ROOT)
        if relative == Path(__file__).relative_to(ROOT):
            continue  # this file spells the patterns out
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line) or escapes(relative, line):
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert offenders == []


@pytest.mark.parametrize(
    ("relative", "line", "outside"),
    [
        (Path("tests/engine/x.py"), 'Path(__file__).resolve().parents[2] / "tests"', False),
        (Path("tests/engine/x.py"), 'Path(__file__).resolve().parents[2].parent / "x"', True),
        (Path("tests/x.py"), 'Path(__file__).resolve().parents[1] / "data"', False),
        (Path("tests/x.py"), 'Path(__file__).resolve().parents[2] / "x"', True),
        (Path("bench/x.py"), "Path(__file__).parent.parent", False),
        (Path("bench/x.py"), "Path(__file__).resolve().parent.parent.parent", True),
    ],
)
def test_the_parent_chain_check_tells_inside_from_outside(relative, line, outside):
    assert escapes(relative, line) is outside


def test_the_data_the_tests_read_is_in_the_repository():
    for folder in (DATA, FIXTURES, CORPUS):
        assert folder.resolve().is_relative_to(ROOT)
    assert (FIXTURES / "SOURCES.md").is_file()
    assert (CORPUS / "README.md").is_file()
    assert (CORPUS / "MANIFEST.tsv").is_file()
    assert len(list(CORPUS.rglob("*.jsonl*"))) == 52
