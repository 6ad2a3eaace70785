"""An input topic with offset gaps: commits still reach the end, and a restart processes nothing
twice.

Records written in transactions leave a commit marker after each transaction's records in
every partition it touched: an offset no consumer ever receives. Faust's own fetch loop marks
such offsets as gaps so its commits may pass them; the batch lane does the same
(`LaneConsumer.getmany`). Without that, Faust's commit advances one run of consecutive offsets
per commit interval, the group's committed offsets fall behind what was processed, and a
restart processes it all again.

Apache Kafka only: aiokafka's transactional producer needs InitProducerId, which Tansu 0.6.0
refuses (docs/brokers.md).
"""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from stream.kafka.admin import ensure_input_topic
from tests.support.harness import (
    WorkerProcess,
    consume_all,
    kafka_only,
    run,
    wait_until,
    worker_settings,
)
from tests.support.outputs import difference, offline_results, per_session
from tests.support.workload import workload

TRANSACTION_RECORDS = 4  # records per transaction: a marker every few offsets per partition
STALL_TIMEOUT = 6.0

pytestmark = kafka_only(
    "Tansu 0.6.0 refuses aiokafka's transactional producer (InitProducerId); the "
    "Kafka suite runs this test"
)


async def produce_in_transactions(settings, records, name: str) -> None:
    """Committed transactions of TRANSACTION_RECORDS records each."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, transactional_id=name,
                                linger_ms=5)
    await producer.start()
    try:
        for start in range(0, len(records), TRANSACTION_RECORDS):
            async with producer.transaction():
                for key, value in records[start:start + TRANSACTION_RECORDS]:
                    await producer.send(settings.input_topic, value, key=key)
    finally:
        await producer.stop()


async def partition_ends(settings) -> dict[int, tuple[int, int]]:
    """Per input partition: (offset after its last record, log end offset). The two differ
    by the commit marker of the partition's last transaction."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(settings.input_topic, p) for p in range(settings.partitions)]
        ends = await consumer.end_offsets(tps)
        result = {}
        for tp in tps:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            last = None
            while await consumer.position(tp) < ends[tp]:
                for records in (await consumer.getmany(tp, timeout_ms=1000)).values():
                    last = records[-1].offset if records else last
            result[tp.partition] = ((last + 1) if last is not None else 0, ends[tp])
        return result
    finally:
        await consumer.stop()


async def committed(settings) -> dict[int, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(settings.app_id)
        return {tp.partition: meta.offset for tp, meta in offsets.items()
                if tp.topic == settings.input_topic}
    finally:
        await admin.close()


def test_commits_pass_transaction_markers_and_a_restart_repeats_nothing(broker, tmp_path: Path):
    records = workload(600, 24, seed=21)
    first, later = records[:-30], records[-30:]
    settings = worker_settings(broker, "gaps", tmp_path, stall_timeout=STALL_TIMEOUT)
    ensure_input_topic(settings)
    run(produce_in_transactions(settings, first, "gaps-first"))
    ends = run(partition_ends(settings))
    # The input really has gaps: more offsets than records, and every partition ends in a
    # commit marker.
    assert sum(end for _, end in ends.values()) > len(first) + 10 * settings.partitions
    assert all(after_last < end for after_last, end in ends.values()), ends

    log = tmp_path / "worker.log"
    worker = WorkerProcess(settings, log).start()
    try:
        wait_until(lambda: (worker.stats() or {}).get("entries_in") == len(first), 90,
                   "the first records")
        # Every record processed is committed: the group's offsets reach past each
        # partition's last record, not the first gap after what was committed before (Faust
        # commits every 2.8 s; this input has dozens of gaps per partition). The log ends one
        # offset further, at the last transaction's commit marker, which no consumer receives:
        # Faust's commits stop before it too, as nothing after it was acknowledged.
        want = {p: after_last for p, (after_last, _) in ends.items()}
        try:
            wait_until(lambda: run(committed(settings)) == want, 20, "commits past every gap")
        except TimeoutError:
            pytest.fail(f"committed {run(committed(settings))}, records end at {want}")
        # Idle at the end of a transactional input, the last commit marker is the one offset
        # left unread; it is no lag, and the stall watchdog must not take it for one.
        time.sleep(2.5 * STALL_TIMEOUT)
        assert worker.process.poll() is None, worker.log_tail()
        lags = [line for line in worker.get("/metrics").decode().splitlines()
                if line.startswith("session_stream_consumer_lag{")]
        assert len(lags) == settings.partitions and all(x.endswith(" 0.0") for x in lags), lags
    finally:
        assert worker.stop(signal.SIGTERM) == 0

    expected = dict(offline_results(records)[0])
    clean: dict = {}

    def all_kept() -> bool:
        nonlocal clean
        clean = per_session(run(consume_all(settings, settings.clean_topic)))
        return clean == expected

    worker = WorkerProcess(settings, log).start()
    try:
        run(produce_in_transactions(settings, later, "gaps-later"))
        with contextlib.suppress(TimeoutError):  # the assertions say what differs
            wait_until(all_kept, 60, "every kept entry on the clean topic")
        stats = worker.stats()
    finally:
        worker.stop()
    # Only the new records were processed after the restart...
    assert stats["entries_in"] == len(later), stats
    # ...and the clean topic holds every kept entry exactly once: nothing came out twice.
    assert clean == expected, difference(clean, expected)
