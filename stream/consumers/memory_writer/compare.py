"""The demo's proof: how many lines of each memory file repeat an earlier line, for the same
sessions written from the raw topic and from the clean topic.

A line repeats an earlier one when it says the same words (whitespace aside), whatever its
label: `assistant (delivered): X` after `assistant: X` is the reply twice to whoever reads the
memory.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from stream.consumers.memory_writer.render import line_text, message_lines


def duplicate_lines(directory: Path) -> dict[str, tuple[int, int]]:
    """Per memory file (session file name): (lines, lines repeating an earlier one)."""
    counts = {}
    for path in sorted(Path(directory).glob("*.md")):
        lines = message_lines(path.read_bytes().decode("utf-8", "replace"))
        seen = Counter(line_text(line) for line in lines)
        counts[path.stem] = (len(lines), sum(n - 1 for n in seen.values()))
    return counts


def duplicate_line_report(dir_raw: Path, dir_clean: Path) -> dict:
    """Lines and duplicate lines per session and in total, of the same sessions written from
    the raw topic and from the clean topic:

    {"sessions": {name: {"raw_lines", "raw_duplicates", "clean_lines", "clean_duplicates"}},
     "total": {the same four keys}}
    """
    raw, clean = duplicate_lines(Path(dir_raw)), duplicate_lines(Path(dir_clean))
    sessions = {}
    for name in sorted(raw.keys() | clean.keys()):
        raw_lines, raw_dups = raw.get(name, (0, 0))
        clean_lines, clean_dups = clean.get(name, (0, 0))
        sessions[name] = {
            "raw_lines": raw_lines,
            "raw_duplicates": raw_dups,
            "clean_lines": clean_lines,
            "clean_duplicates": clean_dups,
        }
    keys = ("raw_lines", "raw_duplicates", "clean_lines", "clean_duplicates")
    total = {key: sum(counts[key] for counts in sessions.values()) for key in keys}
    return {"sessions": sessions, "total": total}


def format_report(report: dict) -> str:
    """The report as a plain-text table, a row per session and one for the total."""
    rows = [("session", "raw lines", "raw duplicates", "clean lines", "clean duplicates")]
    for name, counts in [*report["sessions"].items(), ("total", report["total"])]:
        rows.append((name, *(str(value) for value in counts.values())))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    )
