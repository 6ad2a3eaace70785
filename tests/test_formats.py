"""What a user sees of the stored formats: `--version` names them, and a command that meets
one newer than it reads stops with one line naming both and exit code 4."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

import stream
from stream.formats import EXIT_CODE


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stream.cli", *args], capture_output=True,
                          text=True, timeout=60, cwd=cwd, check=False)


def test_version_names_the_package_and_the_formats_it_stores() -> None:
    done = _run("--version")

    assert done.returncode == 0
    assert done.stdout == (f"session-stream {stream.__version__} (formats: state 4, "
                           "positions 1, memory index 1)\n")


def test_the_package_version_is_the_one_pyproject_installs() -> None:
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()

    assert 'dynamic = ["version"]' in pyproject
    assert 'version = {attr = "stream.__version__"}' in pyproject


def test_a_source_whose_positions_are_of_a_newer_format_stops_with_one_line(
        tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    checkpoint = tmp_path / "follow.json"
    checkpoint.write_bytes(orjson.dumps({"version": 2, "kind": "follow", "origin": str(folder)}))

    done = _run("follow", str(folder), "--checkpoint", str(checkpoint), "--once",
                "--broker", "kafka://127.0.0.1:9")

    assert done.returncode == EXIT_CODE == 4
    assert done.stderr.splitlines() == [
        f"session-stream follow: checkpoint {checkpoint} holds positions format 2, newer than "
        f"session-stream {stream.__version__} reads (positions format 1); run the version "
        "that wrote it or a later one (docs/upgrading.md)"
    ]


def test_a_memory_writer_whose_folder_is_of_a_newer_index_format_stops_with_one_line(
        tmp_path: Path) -> None:
    index = tmp_path / "memory" / ".index"
    index.mkdir(parents=True)
    (index / "FORMAT").write_text("2\n")

    done = _run("memory-writer", "--out", str(tmp_path / "memory"), "--once",
                "--broker", "kafka://127.0.0.1:9")

    assert done.returncode == EXIT_CODE
    assert done.stderr.splitlines() == [
        f"session-stream memory-writer: {index} holds memory index format 2, newer than "
        f"session-stream {stream.__version__} reads (memory index format 1); run the version "
        "that wrote it or a later one (docs/upgrading.md)"
    ]
