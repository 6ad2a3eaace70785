"""Peak RSS of the worker's state for many small sessions: `python -m bench.rss --sessions N`.

Runs the engine through BatchProcessor with a dict-backed store (the bytes Faust's memory://
tables hold) over N small synthetic sessions, in batches as the worker sees them, and prints
one JSON object with ru_maxrss before and after. Run in its own process so the figure is this
workload's alone.
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time

import orjson

from bench.core import kafka_records, run_batches, table_store
from bench.workload import Synthetic
from stream.engine import Engine
from stream.settings import Settings
from stream.worker.processor import BatchProcessor


def _rss_now() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def measure(sessions: int, length: int, wave: int) -> dict:
    synthetic = Synthetic()
    store = table_store()
    processor = BatchProcessor(Engine(), store, Settings.load(environ={}))
    gc.collect()
    baseline_peak, baseline_now = _peak(), _rss_now()
    entries = 0
    start = time.perf_counter()
    for workload in synthetic.waves(sessions, length, wave):
        records = kafka_records(workload)
        run_batches(records, store, processor=processor)
        entries += len(records)
    seconds = time.perf_counter() - start
    gc.collect()
    return {
        "sessions": store.size()[0],
        "entries_per_session": length,
        "entries": entries,
        "memory_keys": store.size()[1],
        "seconds": seconds,
        "entries_per_s": entries / seconds if seconds else 0.0,
        "baseline_rss_bytes": baseline_now,
        "baseline_peak_rss_bytes": baseline_peak,
        "peak_rss_bytes": _peak(),
        "final_rss_bytes": _rss_now(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rss")
    parser.add_argument("--sessions", type=int, default=1_000_000)
    parser.add_argument("--length", type=int, default=3, help="entries per session")
    parser.add_argument("--wave", type=int, default=500, help="sessions interleaved at a time")
    args = parser.parse_args(argv)
    result = measure(args.sessions, args.length, args.wave)
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
