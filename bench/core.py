"""The in-process benchmarks: parse floor, engine, scaling and state (sections 1-4).

Timings alternate between the floor and the contender and keep the best of the repeats: on a
shared machine the best run is the one least disturbed by other tenants, for both sides alike.
"""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import orjson

from bench.workload import Entry, Synthetic, load_corpus, total_bytes
from stream.engine import DictMemory, Engine, FileOrigin, Session, SessionState
from stream.engine.tally import Tally
from stream.settings import Settings
from stream.worker.processor import BatchProcessor, InRecord
from stream.worker.tables import ChangelogRecord, StoredSession, TableStore

PARTITIONS = 4
BATCH = 1000


def _best(seconds: list[float]) -> float:
    return min(seconds)


def _per_entry(seconds: list[float], entries: int) -> list[float]:
    """Every repeat's µs per entry, in run order: the spread the best one was taken from."""
    return [1e6 * s / entries for s in seconds]


def numbered(workload: Sequence[Entry]) -> list[tuple[str, bytes, int]]:
    """(session id, raw, line number within its session): the engine's source positions."""
    lines: dict[str, int] = {}
    out = []
    for sid, raw in workload:
        line = lines.get(sid, 0) + 1
        lines[sid] = line
        out.append((sid, raw, line))
    return out


def parse_all(raws: Sequence[bytes]) -> float:
    loads = orjson.loads
    start = time.perf_counter()
    for raw in raws:
        loads(raw)
    return time.perf_counter() - start


def engine_all(items: Sequence[tuple[str, bytes, int]], engine: Engine | None = None,
               tally: Tally | None = None) -> tuple[float, dict[str, Session]]:
    """The offline engine over `items` from fresh state: one Session (DictMemory) per id."""
    engine = engine or Engine()
    window = engine.limits.max_ids
    sessions: dict[str, Session] = {}
    process = engine.process
    start = time.perf_counter()
    for sid, raw, line in items:
        session = sessions.get(sid)
        if session is None:
            session = sessions[sid] = Session(sid, SessionState(), DictMemory(window))
        verdict = process(session, raw, FileOrigin(sid, line))
        if tally is not None:
            tally.add(verdict)
    return time.perf_counter() - start, sessions


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def parse_and_engine(workload: Sequence[Entry], repeats: int) -> tuple[dict, dict]:
    raws = [raw for _, raw in workload]
    items = numbered(workload)
    size = total_bytes(workload)
    parse_s, engine_s = [], []
    tally = Tally()
    engine_all(items, tally=tally)  # warm-up, and the verdicts' tally
    for _ in range(repeats):
        parse_s.append(parse_all(raws))
        gc.collect()
        engine_s.append(engine_all(items)[0])
        gc.collect()
    parse_best, engine_best = _best(parse_s), _best(engine_s)
    parse = {
        "entries": len(raws),
        "bytes": size,
        "seconds": parse_best,
        "entries_per_s": rate(len(raws), parse_best),
        "mb_per_s": size / 1e6 / parse_best,
        "us_per_entry_runs": _per_entry(parse_s, len(raws)),
        "repeats": repeats,
    }
    engine_rate = rate(len(items), engine_best)
    engine = {
        "entries": len(items),
        "sessions": len({sid for sid, _ in workload}),
        "seconds": engine_best,
        "entries_per_s": engine_rate,
        "mb_per_s": size / 1e6 / engine_best,
        "us_per_entry": 1e6 / engine_rate if engine_rate else 0.0,
        "us_per_entry_runs": _per_entry(engine_s, len(items)),
        "ratio_to_parse": engine_rate / parse["entries_per_s"],
        "kept": tally.kept,
        "dropped": tally.dropped,
        "dead_lettered": tally.dead_lettered,
        "alerts": sum(tally.alerts_by_kind.values()),
        "repeats": repeats,
    }
    return parse, engine


def batch_path(workload: Sequence[Entry], repeats: int, engine: dict) -> dict:
    """The worker's per-record path without a broker: the same entries as Kafka records through
    a BatchProcessor and its tables in batches (fresh state each run), against `engine`'s
    figure from the same workload: what the worker adds to the engine before any I/O."""
    records = kafka_records(workload)
    run_batches(records, table_store())  # warm-up
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_batches(records, table_store())
        seconds.append(time.perf_counter() - start)
        gc.collect()
    runs = _per_entry(seconds, len(records))
    us = _best(runs)
    return {
        "entries": len(records),
        "batch": BATCH,
        "us_per_entry": us,
        "us_per_entry_runs": runs,
        "us_beyond_engine": us - engine["us_per_entry"],
        "repeats": repeats,
    }


def scaling(sessions: int, length: int, repeats: int, synthetic: Synthetic | None = None) -> dict:
    """Per-entry engine cost with 10x the sessions and with 10x longer sessions, against a base
    of `sessions` x `length` run 10 times over fresh state (the same entry count as the others).

    The 10x sessions are also run a group of `sessions` at a time, all of them kept: the same
    entries and the same state in the end, but only as many sessions interleaved as in the base.
    What that run saves is the cost of interleaving (each session's state is cold in the CPU's
    caches when its next entry comes), not of holding more state."""
    synthetic = synthetic or Synthetic()
    base = numbered(synthetic.workload(sessions, length, prefix="base"))
    wide_workload = synthetic.workload(10 * sessions, length, prefix="wide")
    wide = numbered(wide_workload)
    grouped = numbered(in_groups(wide_workload, sessions))
    deep = numbered(synthetic.workload(sessions, 10 * length, prefix="deep"))

    def run_base() -> float:
        return sum(engine_all(base)[0] for _ in range(10))

    timed: dict[str, Callable[[], float]] = {
        "base": run_base,
        "more_sessions": lambda: engine_all(wide)[0],
        "more_sessions_grouped": lambda: engine_all(grouped)[0],
        "longer_sessions": lambda: engine_all(deep)[0],
    }
    timings: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(repeats):
        for name, run in timed.items():
            timings[name].append(run())
            gc.collect()
    counts = {"base": 10 * len(base), "more_sessions": len(wide),
              "more_sessions_grouped": len(grouped), "longer_sessions": len(deep)}
    runs = {name: _per_entry(t, counts[name]) for name, t in timings.items()}
    us = {name: _best(per_entry) for name, per_entry in runs.items()}
    return {
        "base": {"sessions": sessions, "entries_per_session": length, "runs": 10,
                 "us_per_entry": us["base"], "us_per_entry_runs": runs["base"]},
        "more_sessions": {"sessions": 10 * sessions, "entries_per_session": length,
                          "us_per_entry": us["more_sessions"],
                          "us_per_entry_runs": runs["more_sessions"],
                          "ratio_to_base": us["more_sessions"] / us["base"]},
        "more_sessions_grouped": {"sessions": 10 * sessions, "interleaved": sessions,
                                  "entries_per_session": length,
                                  "us_per_entry": us["more_sessions_grouped"],
                                  "us_per_entry_runs": runs["more_sessions_grouped"],
                                  "ratio_to_base": us["more_sessions_grouped"] / us["base"]},
        "longer_sessions": {"sessions": sessions, "entries_per_session": 10 * length,
                            "us_per_entry": us["longer_sessions"],
                            "us_per_entry_runs": runs["longer_sessions"],
                            "ratio_to_base": us["longer_sessions"] / us["base"]},
        "repeats": repeats,
    }


def in_groups(workload: Sequence[Entry], size: int) -> list[Entry]:
    """`workload` reordered into groups of `size` sessions, one group after another (by first
    appearance); within a group the entries keep their interleaving, and every session its
    order."""
    group: dict[str, int] = {}
    for sid, _ in workload:
        if sid not in group:
            group[sid] = len(group) // size
    return sorted(workload, key=lambda item: group[item[0]])


# ---------------------------------------------------------------------------------------------
# State


def table_store() -> TableStore:
    """The worker's store over two plain dicts: the bytes its memory:// tables hold."""
    return TableStore({}, {}, "sessions", "memory")


@dataclass
class ChangelogCount:
    """What the worker's flushes write to its two changelogs (keyed by table)."""

    writes: Counter[str] = field(default_factory=Counter)
    value_bytes: Counter[str] = field(default_factory=Counter)
    key_bytes: Counter[str] = field(default_factory=Counter)

    def add(self, records: Iterable[ChangelogRecord]) -> None:
        for record in records:
            self.writes[record.topic] += 1
            self.value_bytes[record.topic] += len(record.value or b"")
            self.key_bytes[record.topic] += len(record.key)


def partition_of(key: bytes) -> int:
    return zlib.crc32(key) % PARTITIONS


def kafka_records(workload: Sequence[Entry], topic: str = "bench") -> list[InRecord]:
    """The workload as the worker would consume it: keyed by session, offsets per partition."""
    offsets = [0] * PARTITIONS
    records = []
    for sid, raw in workload:
        key = sid.encode()
        partition = partition_of(key)
        records.append(InRecord(topic, partition, offsets[partition], key, raw))
        offsets[partition] += 1
    return records


def run_batches(records: Sequence[InRecord], store: TableStore, batch: int = BATCH,
                on_changelog: Callable[[list[ChangelogRecord]], object] = lambda _: None,
                processor: BatchProcessor | None = None) -> BatchProcessor:
    """The records through a BatchProcessor (a new one unless given) in batches, as the
    worker runs them; each batch's changelog records go to `on_changelog` (the worker sends
    them, then drops them)."""
    processor = processor or BatchProcessor(Engine(), store, Settings.load(environ={}))
    for start in range(0, len(records), batch):
        on_changelog(processor.process(records[start : start + batch], time.time()).changelog)
    return processor


def changelog(workload: Sequence[Entry], batch: int = BATCH) -> dict:
    """Bytes the worker's flushes would write to the two changelogs, per input entry."""
    store, count = table_store(), ChangelogCount()
    records = kafka_records(workload)
    start = time.perf_counter()
    run_batches(records, store, batch, count.add)
    seconds = time.perf_counter() - start
    n = len(records)
    per_batch = [len({r.key for r in records[i : i + batch]}) for i in range(0, n, batch)]
    values = sum(count.value_bytes.values())
    keys = sum(count.key_bytes.values())
    return {
        "entries": n,
        "sessions": store.size()[0],
        "batch": batch,
        "sessions_per_batch": statistics.fmean(per_batch),
        "value_bytes_per_entry": values / n,
        "key_and_value_bytes_per_entry": (values + keys) / n,
        "sessions_value_bytes_per_entry": count.value_bytes["sessions"] / n,
        "memory_value_bytes_per_entry": count.value_bytes["memory"] / n,
        "session_writes_per_entry": count.writes["sessions"] / n,
        # Distinct memory keys left in the table (one per remembered entry id, idempotency key,
        # ...): what a restart replays from the changelog at least, per session and per entry.
        "memory_keys_per_session": store.size()[1] / max(1, store.size()[0]),
        "memory_keys_per_entry": store.size()[1] / n,
        "memory_writes_per_entry": count.writes["memory"] / n,
        "mean_session_value_bytes": count.value_bytes["sessions"]
        / max(1, count.writes["sessions"]),
        "mean_memory_value_bytes": count.value_bytes["memory"] / max(1, count.writes["memory"]),
        "batch_processor_entries_per_s": rate(n, seconds),
    }


def _distribution(values: Sequence[int]) -> dict:
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "mean": statistics.fmean(ordered),
        "p50": ordered[len(ordered) // 2],
        "p95": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))],
        "max": ordered[-1],
    }


def serialized_sizes(sessions: dict[str, Session]) -> dict:
    now = time.time()
    return _distribution(
        [len(StoredSession(s.state, now, 0).to_bytes()) for s in sessions.values()]
    )


def traced_bytes(build: Callable[[], object]) -> tuple[int, object]:
    """Bytes still allocated by `build()`'s result once it returns (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = build()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, kept


def state(corpus_entries: Sequence[Entry], small_sessions: int, small_length: int,
          synthetic: Synthetic | None = None) -> dict:
    synthetic = synthetic or Synthetic()
    corpus_items = numbered(corpus_entries)
    small = synthetic.workload(small_sessions, small_length, prefix="idle")
    small_items = numbered(small)

    # Offline engine objects (SessionState + DictMemory) per idle session, whole corpus sessions.
    whole = numbered([(s.session_id, line) for s in load_corpus() for line in s.lines])
    corpus_bytes, corpus_sessions = traced_bytes(lambda: engine_all(whole)[1])
    small_bytes, small_engine = traced_bytes(lambda: engine_all(small_items)[1])

    # The worker's form: bytes in two tables (what Faust's memory:// store holds).
    def worker_tables() -> TableStore:
        store = table_store()
        run_batches(kafka_records(small), store)
        return store

    table_bytes, store = traced_bytes(worker_tables)
    n_small = len(small_engine)
    return {
        "serialized_bytes_per_session": {
            "corpus_sessions": serialized_sizes(corpus_sessions),
            "small_synthetic_sessions": serialized_sizes(small_engine),
            "replayed_corpus_prefixes": serialized_sizes(engine_all(corpus_items)[1]),
        },
        "memory_bytes_per_idle_session": {
            "engine_objects_corpus_sessions": corpus_bytes / len(corpus_sessions),
            "engine_objects_small_sessions": small_bytes / n_small,
            "worker_tables_small_sessions": table_bytes / n_small,
            "small_session_entries": small_length,
            "small_sessions": n_small,
            "memory_keys_per_small_session": store.size()[1] / n_small,
        },
    }
