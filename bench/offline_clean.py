"""`session-stream clean` against its floor: reading the same session files, `orjson.loads` of
every line and writing every line back out, as ratios in one run.

The corpus is decompressed into a scratch folder first, as live session files are plain
JSONL: gzip would cost both sides the same and make the ratio look better than it is.
"""

from __future__ import annotations

import gc
import gzip
import io
import shutil
import tempfile
import time
from pathlib import Path

import orjson

from bench.workload import CORPUS
from stream.commands import clean
from stream.engine import Engine
from stream.sources.session_files import find_session_files, open_lines


def _plain_copy(source: Path, target: Path) -> list[Path]:
    """The corpus's session files, decompressed under `target` at their relative paths."""
    copies = []
    for found in find_session_files(source):
        relative = found.relative_to(source)
        if relative.name.endswith(".gz"):
            relative = relative.with_name(relative.name.removesuffix(".gz"))
        copy = target / relative
        copy.parent.mkdir(parents=True, exist_ok=True)
        opener = gzip.open if found.name.endswith(".gz") else open
        with opener(found, "rb") as read, copy.open("wb") as write:
            shutil.copyfileobj(read, write)
        copies.append(copy)
    return copies


def _floor(files: list[Path], out_dir: Path) -> float:
    """What any cleaner of these files does at least: read them, parse every line, write it."""
    loads = orjson.loads
    start = time.perf_counter()
    for number, path in enumerate(files):
        with (out_dir / f"{number}.jsonl").open("wb") as out:
            for _, raw in open_lines(path):
                loads(raw)
                out.write(raw + b"\n")
    return time.perf_counter() - start


def _clean(root: Path, out_dir: Path, alerts: Path) -> float:
    job = clean.plan([str(root)], None, str(out_dir), str(alerts), None)
    start = time.perf_counter()
    clean.run(job, Engine(), io.BytesIO(), io.StringIO())
    return time.perf_counter() - start


def clean_vs_floor(repeats: int) -> dict:
    """Best of `repeats` of each, alternating; the ratio is floor seconds over clean seconds."""
    with tempfile.TemporaryDirectory(prefix="bench-clean-") as scratch:
        root = Path(scratch) / "corpus"
        files = _plain_copy(CORPUS, root)
        entries = sum(1 for path in files for _ in open_lines(path))
        size = sum(path.stat().st_size for path in files)
        floor_s, clean_s = [], []
        for run in range(repeats + 1):  # the first of each is a warm-up
            floor_out, clean_out = Path(scratch) / f"floor{run}", Path(scratch) / f"clean{run}"
            floor_out.mkdir()
            floor_s.append(_floor(files, floor_out))
            gc.collect()
            clean_s.append(_clean(root, clean_out, Path(scratch) / f"alerts{run}.jsonl"))
            gc.collect()
            shutil.rmtree(floor_out)
            shutil.rmtree(clean_out)
    floor_best, clean_best = min(floor_s[1:]), min(clean_s[1:])
    return {
        "files": len(files),
        "entries": entries,
        "bytes": size,
        "floor_seconds": floor_best,
        "clean_seconds": clean_best,
        "floor_us_per_entry": 1e6 * floor_best / entries,
        "clean_us_per_entry": 1e6 * clean_best / entries,
        "ratio_to_floor": floor_best / clean_best,
        "repeats": repeats,
    }
