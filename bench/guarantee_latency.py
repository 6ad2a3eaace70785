"""The clean topic's latency in each processing guarantee (section `guarantees`), on Apache Kafka.

Per guarantee, on fresh topics: one worker, and the corpus replayed into its input topic at a
steady RATE entries/s for `seconds`; an entry's latency is the time a read-committed consumer
of the clean topic received its record less the time just before its send (one clock: one
machine). Exactly once a record is readable only once its transaction commits, at least once
as soon as it is written: the difference is what the transactions cost a record's way. The
first WARM_SECONDS of the load are not counted (the group joins, the JVM warms). Each worker's
/metrics gives what a batch's delivery took and how long its lane waited for it
(`delivery_ms_per_batch`, `commit_wait_ms_per_batch`): the transactions' cost to the
Committer's overlap of one batch's delivery with the next batch's processing, at this rate.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson

from bench.procs import (
    E2E_SESSION_TIMEOUT_S,
    Child,
    create,
    print_alone,
    worker_batch_metrics,
    worker_command,
    worker_settings,
)
from bench.source_latency import Arrivals, latency_summary
from bench.workload import corpus_replay
from stream.brokers import RunningBroker
from stream.kafka.producer import make_producer, send_records
from stream.settings import Settings

GUARANTEES = ("at_least_once", "exactly_once_v2")
RATE = 1000.0  # entries/s, a twentieth of what a worker cleans here: latency, not throughput
WARM_SECONDS = 3.0
TICK_S = 0.01
READY_TIMEOUT = 120.0


def _identify(record) -> tuple[bytes, str | None]:
    return record.key, orjson.loads(record.value).get("id")


async def _send_steadily(settings: Settings, entries: list[tuple[str, bytes]],
                         sent: dict[tuple[bytes, str | None], int]) -> None:
    """Send `entries` at RATE, a tick's worth at a time; the time just before each send."""
    producer = make_producer(settings, linger_ms=0, idempotent=True)
    await producer.start()
    try:
        started, done = time.monotonic(), 0
        while done < len(entries):
            due = min(len(entries), int((time.monotonic() - started) * RATE) + 1)
            tick = [(sid.encode(), raw) for sid, raw in entries[done:due]]
            now = time.time_ns()
            for key, raw in tick:
                sent.setdefault((key, orjson.loads(raw).get("id")), now)
            await send_records(producer, settings.input_topic, tick)
            done = due
            await asyncio.sleep(TICK_S)
    finally:
        await producer.stop()


def run_one(guarantee: str, broker: RunningBroker, seconds: float, workdir: Path,
            log: Callable[[str], None]) -> dict:
    tag = f"eos{guarantee[:5].replace('_', '')}-{uuid.uuid4().hex[:6]}"
    input_topic = f"{tag}-in"
    settings = worker_settings(broker.url, tag, input_topic, workdir,
                               session_timeout=float(E2E_SESSION_TIMEOUT_S),
                               processing_guarantee=guarantee)
    create(broker.bootstrap, [input_topic, *settings.output_topics])
    entries = corpus_replay(int(RATE * (seconds + WARM_SECONDS)), seed=11)
    worker = Child("worker", worker_command(), workdir / f"{tag}.log",
                   settings.environment()).start()
    clean = Arrivals(broker.bootstrap, settings.clean_topic, identify=_identify).start()
    sent: dict[tuple[bytes, str | None], int] = {}
    metrics: dict = {}
    try:
        log(f"  guarantee latency {guarantee}: {RATE:.0f} entries/s for "
            f"{seconds + WARM_SECONDS:.0f}s")
        asyncio.run(_send_steadily(settings, entries, sent))
        quiet_since, seen = time.monotonic(), -1
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() - quiet_since < 3.0 and time.monotonic() < deadline:
            if len(clean.arrived) != seen:
                seen, quiet_since = len(clean.arrived), time.monotonic()
            time.sleep(0.2)
        metrics = worker_batch_metrics(settings.web_port)
    finally:
        clean.stop()
        worker.stop()
    warm_until = min(sent.values(), default=0) + int(WARM_SECONDS * 1e9)
    latencies = sorted((clean.arrived[key] - at) / 1e6 for key, at in sent.items()
                       if key in clean.arrived and at >= warm_until)
    result = {"entries": len(sent), "arrived": len(latencies), **latency_summary(latencies),
              **metrics}
    log(f"    -> p50 {result.get('p50_ms', 0):.0f} ms, p99 {result.get('p99_ms', 0):.0f} ms; "
        f"delivery {result.get('delivery_ms_per_batch', 0):.1f} ms a batch, the lane waited "
        f"{result.get('commit_wait_ms_per_batch', 0):.1f} ms")
    return result


def run(broker: RunningBroker, seconds: float, workdir: Path,
        log: Callable[[str], None]) -> dict:
    results: dict = {"rate_entries_per_s": RATE, "seconds": seconds,
                     "warm_seconds": WARM_SECONDS}
    for guarantee in GUARANTEES:
        results[guarantee] = run_one(guarantee, broker, seconds, workdir, log)
    alo, eos = (results[g].get("p99_ms") for g in GUARANTEES)
    results["p99_exactly_once_over_at_least_once"] = eos / alo if alo and eos else None
    return results


def main() -> None:
    """`python -m bench.guarantee_latency [SECONDS]`: this section alone, on an Apache Kafka of
    its own, printed as JSON."""
    import sys

    print_alone(run, "kafka", float(sys.argv[1]) if len(sys.argv) > 1 else 20.0)

if __name__ == "__main__":
    main()
