"""The broker `session-stream up` runs, measured on this machine: start to ready, idle memory,
and what survives a SIGKILL of its process, and a clean stop.

    python -m bench.local_broker [--runs 3] [--kinds kafka,tansu] [--out FILE]

Each run starts `session-stream broker` (what `up` runs) on a fresh state folder and times it
from the spawn to the first metadata answer (Kafka's first start formats its storage: that is
in it); reads its RSS 5 s later; writes 3,000 records over 3 partitions (acks=all), commits a
consumer group's offsets, and tries an idempotent and a transactional producer (commit, then
abort); SIGKILLs the broker's process group and starts it again on the same folder, timed the
same way; reads back what is there; then stops it with SIGTERM (timed), starts it once more,
and reads again. Medians (min-max) over the runs, and each run's 1-minute load average, which
on a shared machine tells a quiet run from a loaded one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from stream.brokers.local import free_port, port_is_open
from stream.kafka.admin import answers_metadata
from stream.kafka.consumer import TopicMissing, topic_partitions

RECORDS, PARTITIONS, GROUP = 3000, 3, "bench-durability"
COMMITTED = {0: 100, 1: 200, 2: 300}
TOPIC, TX_TOPIC = "durability", "durability-tx"


def start(state: Path, port: int, memory_only: bool) -> tuple[subprocess.Popen, float]:
    args = [sys.executable, "-m", "stream.cli", "broker", "--state-dir", str(state),
            "--broker-port", str(port), *(["--memory-only"] if memory_only else [])]
    began = time.monotonic()
    process = subprocess.Popen(args, stdout=(state.parent / "broker.log").open("ab"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    options = {"bootstrap_servers": f"127.0.0.1:{port}"}
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the broker exited with {process.returncode}")
        if port_is_open(port):
            try:
                if asyncio.run(answers_metadata(options)):
                    return process, time.monotonic() - began
            except Exception:  # noqa: BLE001 - not ready yet, whatever the client says
                pass
        time.sleep(0.1)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def seed(port: int) -> dict:
    bootstrap = f"127.0.0.1:{port}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1), NewTopic(TX_TOPIC, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sends = [await producer.send(TOPIC, str(i).encode(), partition=i % PARTITIONS)
                 for i in range(RECORDS)]
        await asyncio.gather(*sends)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        offsets = {TopicPartition(TOPIC, p): o for p, o in COMMITTED.items()}
        consumer.assign(list(offsets))
        await consumer.commit(offsets)
    finally:
        await consumer.stop()
    return {"idempotent": await _try(_idempotent(bootstrap)),
            "transactions": await _try(_transactional(bootstrap))}


async def _try(work) -> str:
    try:
        await asyncio.wait_for(work, 45)
        return "works"
    except Exception as error:  # noqa: BLE001 - what the broker answers is the finding
        return f"refused: {type(error).__name__}"


async def _idempotent(bootstrap: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(TX_TOPIC, b"idempotent")
    finally:
        await producer.stop()


async def _transactional(bootstrap: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="bench-tx")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(TX_TOPIC, b"committed")
        await producer.begin_transaction()
        await producer.send_and_wait(TX_TOPIC, b"aborted")
        await producer.abort_transaction()
    finally:
        await producer.stop()


async def survived(port: int) -> dict:
    bootstrap = f"127.0.0.1:{port}"
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                isolation_level="read_committed")
    await consumer.start()
    try:
        partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        try:
            await topic_partitions(consumer, [TOPIC, TX_TOPIC], wait=False)
        except TopicMissing:
            return {"records": 0, "committed": {}, "committed_tx": 0, "aborted_tx": 0}
        ends = await consumer.end_offsets(partitions)
        tx = TopicPartition(TX_TOPIC, 0)
        consumer.assign([*partitions, tx])
        await consumer.seek_to_beginning()
        values: list[bytes] = []
        tx_values: list[bytes] = []
        deadline = time.monotonic() + 30
        # the transactional topic's records come with the others, or within the 2 s after
        while time.monotonic() < deadline and (len(values) < sum(ends.values())
                                               or time.monotonic() < deadline - 28):
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                (values if tp.topic == TOPIC else tx_values).extend(r.value for r in records)
    finally:
        await consumer.stop()
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(GROUP, partitions=partitions)
    finally:
        await admin.close()
    return {"records": len(set(values)),
            "committed": {tp.partition: m.offset for tp, m in offsets.items() if m.offset >= 0},
            "committed_tx": tx_values.count(b"committed"),
            "aborted_tx": tx_values.count(b"aborted")}


def stop(process: subprocess.Popen, sig: signal.Signals) -> float:
    began = time.monotonic()
    os.killpg(process.pid, sig)
    process.wait(120)
    return time.monotonic() - began


def one_run(kind: str) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as folder:
        state, port = Path(folder) / "state", free_port()
        memory_only = kind == "tansu"
        process, cold = start(state, port, memory_only)
        time.sleep(5)
        idle = rss_mib(process.pid)
        producers = asyncio.run(seed(port))
        stop(process, signal.SIGKILL)
        process, after_kill = start(state, port, memory_only)
        kept_after_kill = asyncio.run(survived(port))
        term = stop(process, signal.SIGTERM)
        process, after_term = start(state, port, memory_only)
        kept_after_term = asyncio.run(survived(port))
        stop(process, signal.SIGTERM)
        return {"load": os.getloadavg()[0], "cold_ready_s": cold, "idle_rss_mib": idle,
                "kill9_ready_s": after_kill, "sigterm_stop_s": term,
                "sigterm_ready_s": after_term, "producers": producers,
                "after_kill9": kept_after_kill, "after_sigterm": kept_after_term}


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kinds", default="kafka,tansu")
    parser.add_argument("--out", type=Path, default=Path("bench/results/local_broker.json"))
    args = parser.parse_args()
    results = {kind: [one_run(kind) for _ in range(args.runs)]
               for kind in args.kinds.split(",")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    for kind, runs in results.items():
        print(f"{kind}: load {_spread([r['load'] for r in runs])}; cold start to ready "
              f"{_spread([r['cold_ready_s'] for r in runs])} s; idle RSS "
              f"{_spread([r['idle_rss_mib'] for r in runs])} MiB; SIGKILL to ready "
              f"{_spread([r['kill9_ready_s'] for r in runs])} s; SIGTERM stop "
              f"{_spread([r['sigterm_stop_s'] for r in runs])} s, to ready "
              f"{_spread([r['sigterm_ready_s'] for r in runs])} s")
        for run in runs:
            print(f"  producers {run['producers']}; after SIGKILL {run['after_kill9']}; after "
                  f"SIGTERM {run['after_sigterm']}")


if __name__ == "__main__":
    main()
