"""The engine run from its Python source, in a child process (`SESSION_STREAM_PURE_PYTHON=1`).

Two things need it: the engine's rate on an install without a C compiler, next to the
compiled rate, and the engine profile, since cProfile cannot see inside compiled functions
(the source is the same code, so its hot spots are the compiled engine's too).

`python -m bench.source_engine --entries N --repeats R --profile-entries P` prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from stream import pure


def measure(entries: int, repeats: int, profile_entries: int) -> dict:
    """The child's side: parse floor and engine over the same workload as the parent's."""
    from bench import core
    from bench.profiling import engine_profile
    from bench.workload import corpus_replay
    from stream.engine import engine

    if pure.is_compiled(engine):
        raise SystemExit(f"the engine is compiled here; set {pure.ENV}=1")
    workload = corpus_replay(entries)
    parse, measured = core.parse_and_engine(workload, repeats)
    out = {"parse_floor": parse, "engine": measured}
    if profile_entries:
        out["profile"] = engine_profile(workload[:profile_entries])
    return out


def run(entries: int, repeats: int, profile_entries: int) -> dict:
    cmd = [sys.executable, "-m", "bench.source_engine", "--entries", str(entries),
           "--repeats", str(repeats), "--profile-entries", str(profile_entries)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900,
                          env={**os.environ, pure.ENV: "1"},
                          cwd=Path(__file__).resolve().parents[1])
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip()[-500:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.source_engine")
    parser.add_argument("--entries", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile-entries", type=int, default=0)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.entries, args.repeats, args.profile_entries)))


if __name__ == "__main__":
    main()
