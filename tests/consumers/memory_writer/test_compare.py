"""The raw-vs-clean comparison of memory folders."""

from __future__ import annotations

from pathlib import Path

from stream.consumers.memory_writer import compare as mw


def test_duplicate_line_report_counts_per_session_and_in_total(tmp_path: Path) -> None:
    raw_dir, clean_dir = tmp_path / "raw", tmp_path / "clean"
    raw_dir.mkdir()
    clean_dir.mkdir()
    # the delivered copy says the words of the reply before it: a repeat, whatever its label
    (raw_dir / "a.md").write_text(
        "user: x\nassistant: y\n  z\nassistant (delivered): y\n  z\nassistant: y\n")
    (raw_dir / "b.md").write_text("user: x\nuser: x\nuser: x\n")
    (clean_dir / "a.md").write_text("user: x\nassistant: y\n  z\nassistant: y\n")
    (clean_dir / "b.md").write_text("user: x\n")
    (raw_dir / ".index").mkdir()
    (raw_dir / "notes.txt").write_text("user: x\nuser: x\n")

    report = mw.duplicate_line_report(raw_dir, clean_dir)

    assert report == {
        "sessions": {
            "a": {"raw_lines": 4, "raw_duplicates": 1, "clean_lines": 3, "clean_duplicates": 0},
            "b": {"raw_lines": 3, "raw_duplicates": 2, "clean_lines": 1, "clean_duplicates": 0},
        },
        "total": {"raw_lines": 7, "raw_duplicates": 3, "clean_lines": 4, "clean_duplicates": 0},
    }
    assert mw.format_report(report).splitlines() == [
        "session  raw lines  raw duplicates  clean lines  clean duplicates",
        "a                4               1            3                 0",
        "b                3               2            1                 0",
        "total            7               3            4                 0",
    ]
