"""Exactly once on Apache Kafka: a read-committed reader of the clean, alert and dead-letter
topics sees every record exactly once, byte for byte, through
(a) SIGKILLs of workers at random moments with input flowing,
(b) a worker stalled (SIGSTOP) past its session timeout, then resumed (SIGCONT): it is fenced,
    commits nothing after its partitions moved, and rejoins its group without exiting,
(c) the broker SIGKILLed with transactions open, and started again on the same data.

The reference is the offline `clean` of what the input topic holds once the input is in
(read back: the test's idempotent producer writes each record once, and were one written
twice, the offline run would see it twice too): per session, the clean topic holds exactly its
kept entries, in order; the alert topic exactly its alerts, and the dead-letter topic exactly
its dead letters, each compared without its source (a line offline, an offset in streaming).
A record there twice fails, where the at-least-once tests keep first occurrences.

Apache Kafka only: Tansu grants no transactional producer, and the worker runs at least once
there. CI runs each once, small; `make chaos` runs each EOS_RUNS times at CHAOS_ENTRIES.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaTimeoutError

from stream.brokers import RunningBroker, start_kafka
from stream.commands.clean import clean_session
from stream.engine import Engine
from stream.kafka.admin import ensure_topics
from stream.kafka.configuration import client_options
from stream.kafka.ends import log_end_offsets
from stream.kafka.producer import make_producer, send_records
from stream.settings import Settings
from stream.worker.app import changelog_topics
from tests.support.harness import (
    WorkerProcess,
    consume_all,
    group_offsets,
    kafka_only,
    run,
    wait_until,
    worker_settings,
)
from tests.support.outputs import difference, per_session, without_source
from tests.support.workload import workload

RUNS = int(os.environ.get("EOS_RUNS", "1"))
SEND_ATTEMPTS = 3
ENTRIES = int(os.environ.get("CHAOS_ENTRIES", "3000"))
SESSIONS = int(os.environ.get("CHAOS_SESSIONS", "100"))
KILLS = int(os.environ.get("CHAOS_KILLS", "3"))
SEED = int(os.environ.get("CHAOS_SEED", str(random.SystemRandom().randrange(10**6))))
ROUNDS = 12  # the input arrives in this many rounds while the chaos runs
BATCH_SIZE = 50  # small batches: more transactions open at any moment
BROKER_DOWN_S = 10.0
# aiokafka's lines for a request of an open transaction that found no broker: the worker's
# every produce request is one exactly once, and its other requests are AddPartitionsToTxn,
# AddOffsetsToTxn, TxnOffsetCommit and EndTxn
TRANSACTION_REQUEST_FAILED = re.compile(
    r"(?:Could not|Cannot) send <class 'aiokafka\.protocol\.transaction\.(\w+)'>"
    r"|Got error (produce) response")
# Shorter than the outage: a worker that took the broker's absence for a stall would exit.
STALL_TIMEOUT = 15.0

pytestmark = kafka_only(
    "Tansu 0.6.0 grants no transactional producer (it refuses aiokafka's "
    "InitProducerId), so the worker runs at least once there; the Kafka suite runs these"
)


def with_bad_lines(records: list[tuple[bytes, bytes]], rng: random.Random,
                   ) -> list[tuple[bytes, bytes]]:
    """Now and then a line the engine dead-letters, so the dead-letter topic has records."""
    out: list[tuple[bytes, bytes]] = []
    for key, value in records:
        out.append((key, value))
        if rng.random() < 0.02:
            out.append((key, rng.choice([b'{"type":"message","id":', b"\xff\xfe not utf-8",
                                         b"[1, 2]"])))
    return out


class Feeder(threading.Thread):
    """Produces the input in `rounds` rounds, `pause` seconds apart, through one idempotent
    producer: a send aiokafka retries while the broker is away is written once."""

    def __init__(self, settings: Settings, records: list[tuple[bytes, bytes]],
                 pause: float, rounds: int = ROUNDS) -> None:
        super().__init__(daemon=True)
        self.settings, self.records, self.pause, self.rounds = settings, records, pause, rounds
        self.error: BaseException | None = None
        self.sent = 0

    def run(self) -> None:
        try:
            run(self._feed())
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error

    async def _feed(self) -> None:
        producer = make_producer(self.settings, idempotent=True)
        await producer.start()
        try:
            size, rounds = len(self.records), self.rounds
            for n in range(rounds):
                part = self.records[n * size // rounds:(n + 1) * size // rounds]
                self.sent += await self._send(producer, part)
                await asyncio.sleep(self.pause)
        finally:
            await producer.stop()

    async def _send(self, producer: AIOKafkaProducer, part: list[tuple[bytes, bytes]]) -> int:
        """The broker this test kills can be away longer than a request waits: the round goes
        again. A record written twice is then in the input topic twice, and the offline clean
        of what the input topic holds, which the outputs are checked against, drops it too."""
        attempt = 1
        while True:
            try:
                return await send_records(producer, self.settings.input_topic, part)
            except KafkaTimeoutError:
                if attempt == SEND_ATTEMPTS:
                    raise
                attempt += 1


async def produce_once(settings: Settings, records: list[tuple[bytes, bytes]]) -> None:
    producer = make_producer(settings, idempotent=True)
    await producer.start()
    try:
        await send_records(producer, settings.input_topic, records)
    finally:
        await producer.stop()


def thirds(records: list) -> tuple[list, list, list]:
    """The input before the event (a tenth), the burst it lands in (three fifths), after."""
    a, b = len(records) // 10, len(records) * 7 // 10
    return records[:a], records[a:b], records[b:]


def burst_under_way(worker: WorkerProcess, settings: Settings,
                    burst: list[tuple[bytes, bytes]]) -> Feeder:
    """Send `burst` at once and return as soon as `worker` has processed a record of it: its
    batches are in hand then, a transaction open (the worker takes a burst's records its
    share for a few hundred ms; a poll every few ms sees the first of them)."""
    processed = worker.stats()["entries_in"]
    feeder = Feeder(settings, burst, pause=0.0, rounds=1)
    feeder.start()
    deadline = time.monotonic() + 60
    while (worker.stats() or {}).get("entries_in", 0) <= processed:
        assert time.monotonic() < deadline, "the worker took none of the burst"
        time.sleep(0.003)
    return feeder


def eos_settings(broker: RunningBroker, name: str, tmp_path: Path, **changes) -> Settings:
    settings = worker_settings(broker, name, tmp_path, processing_guarantee="exactly_once_v2",
                               **{"batch_size": BATCH_SIZE, **changes})
    ensure_topics(settings, changelog_topics(settings))
    return settings


def committed_everything(settings: Settings) -> bool:
    ends = run(log_end_offsets(client_options(settings), [
        TopicPartition(settings.input_topic, p) for p in range(settings.partitions)]))
    committed = run(group_offsets(settings))
    return all(committed.get(tp.partition, 0) >= end for tp, end in ends.items())


def offline(records: list[tuple[bytes, bytes]]) -> dict:
    """What `session-stream clean` makes of the records: kept lines per session, and the
    alerts and dead letters without their source, counted."""
    by_session: dict[str, list[bytes]] = defaultdict(list)
    for key, raw in records:
        by_session[key.decode()].append(raw)
    kept: dict[str, list[bytes]] = {}
    alerts: Counter[bytes] = Counter()
    letters: Counter[bytes] = Counter()
    engine = Engine()
    for session_id, lines in by_session.items():
        for verdict in clean_session(engine, session_id, f"{session_id}.jsonl",
                                     enumerate(lines, 1)):
            if verdict.output is not None:
                kept.setdefault(session_id, []).append(verdict.output)
            alerts.update(without_source(alert.as_json()) for alert in verdict.alerts)
            if verdict.dead_letter is not None:
                letters[without_source(verdict.dead_letter.as_json())] += 1
    return {"kept": kept, "alerts": alerts, "dead_letters": letters}


def streamed(settings: Settings) -> dict:
    """What a read-committed reader of the three output topics sees, the same way."""
    clean = run(consume_all(settings, settings.clean_topic))
    alerts = run(consume_all(settings, settings.alerts_topic))
    letters = run(consume_all(settings, settings.dlq_topic))
    return {
        "kept": per_session(clean),
        "alerts": Counter(without_source(orjson.loads(r.value)) for r in alerts),
        "dead_letters": Counter(without_source(orjson.loads(r.value)) for r in letters),
    }


def assert_exactly_once(settings: Settings, context: str) -> dict:
    inputs = [(r.key, r.value) for r in sorted(run(consume_all(settings, settings.input_topic)),
                                               key=lambda r: (r.partition, r.offset))]
    expected, got = offline(inputs), streamed(settings)
    assert got["kept"] == expected["kept"], f"{context}\n" + difference(got["kept"],
                                                                        expected["kept"])
    twice = {alert: n for alert, n in got["alerts"].items() if n > expected["alerts"][alert]}
    missing = expected["alerts"] - got["alerts"]
    assert not twice and not missing, f"{context}\nalerts more often than offline: " \
        f"{list(twice.items())[:3]}; missing: {list(missing.items())[:3]}"
    assert got["dead_letters"] == expected["dead_letters"], context
    assert expected["dead_letters"], "the workload dead-letters nothing: the check is empty"
    return {"inputs": len(inputs), "clean": sum(map(len, got["kept"].values())),
            "alerts": sum(got["alerts"].values()),
            "dead_letters": sum(got["dead_letters"].values())}


def wait_committed(settings: Settings, workers: list[WorkerProcess], context: str) -> None:
    def done() -> bool:
        for worker in workers:
            worker.restart_if_stalled()
        return committed_everything(settings)

    with contextlib.suppress(TimeoutError):  # the comparison says what is missing
        wait_until(done, 240, "the group's commits to reach the input's end")


@pytest.mark.parametrize("number", range(RUNS))
def test_sigkills_with_input_flowing_leave_each_output_exactly_once(broker, tmp_path: Path,
                                                                   number: int) -> None:
    seed = SEED + number
    rng = random.Random(seed)
    settings = eos_settings(broker, f"eoskill{seed}", tmp_path)
    records = with_bad_lines(workload(ENTRIES, SESSIONS, seed=seed), rng)
    workers = [WorkerProcess(settings, tmp_path / f"worker-{n}.log").start() for n in range(2)]
    feeder = Feeder(settings, records, pause=1.0)
    events = []
    started = time.monotonic()
    try:
        feeder.start()
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.5, 3.0))
            worker = rng.choice(workers)
            events.append(f"{time.monotonic() - started:5.1f}s SIGKILL {worker.log_path.stem} "
                          f"({feeder.sent} of {len(records)} sent)")
            worker.send(signal.SIGKILL)
            worker.process.wait()
            worker.start(wait=False)
        feeder.join(180)
        assert not feeder.is_alive() and feeder.error is None, feeder.error
        context = f"seed {seed} (CHAOS_SEED={seed} replays it):\n" + "\n".join(events)
        wait_committed(settings, workers, context)
        counts = assert_exactly_once(settings, context)
    finally:
        for worker in workers:
            worker.stop()
    print(f"\nexactly once through {KILLS} SIGKILLs, seed {seed}: {counts}; "
          f"{time.monotonic() - started:.0f}s")


@pytest.mark.parametrize("number", range(RUNS))
def test_a_stalled_worker_is_fenced_commits_nothing_more_and_rejoins(broker, tmp_path: Path,
                                                                     number: int) -> None:
    """The worker is stopped while it works through a burst of input, so it holds records and
    an open transaction; the group gives its partitions to the other worker, whose producers
    fence it. Resumed, it commits none of what it held, and rejoins."""
    seed = SEED + number
    rng = random.Random(seed)
    settings = eos_settings(broker, f"eosstall{seed}", tmp_path)
    records = with_bad_lines(workload(ENTRIES, SESSIONS, seed=seed), rng)
    before, burst, after = thirds(records)
    stalled = WorkerProcess(settings, tmp_path / "stalled.log").start()
    other = WorkerProcess(settings, tmp_path / "other.log").start()
    started = time.monotonic()
    pause = settings.session_timeout + rng.uniform(3.0, 6.0)
    try:
        run(produce_once(settings, before))
        wait_until(lambda: committed_everything(settings), 90, "the first input committed")
        bursting = burst_under_way(stalled, settings, burst)
        stalled.send(signal.SIGSTOP)
        bursting.join(60)
        feeder = Feeder(settings, after, pause=pause / ROUNDS)  # input flows meanwhile
        feeder.start()
        time.sleep(pause)
        stalled.send(signal.SIGCONT)
        feeder.join(180)
        assert feeder.error is None and bursting.error is None, feeder.error or bursting.error
        context = f"seed {seed}: stalled {pause:.1f}s"
        wait_committed(settings, [stalled, other], context)
        counts = assert_exactly_once(settings, context)
        # it went on: the same process, in the group again, nothing of it crashed
        assert stalled.running(), stalled.log_tail()
        assert "Crashed reason" not in stalled.log_text(), stalled.log_tail()
        wait_until(lambda: bool((stalled.stats() or {}).get("assigned_partitions")), 60,
                   "the stalled worker to be assigned partitions again")
        given_up = stalled.stats()["partitions_given_up"]
    finally:
        stalled.send(signal.SIGCONT)
        stalled.stop()
        other.stop()
    print(f"\nexactly once through a {pause:.1f}s stall, seed {seed}: {counts}; the stalled "
          f"worker gave up {given_up} fenced partitions; {time.monotonic() - started:.0f}s")
    assert given_up > 0, "the stalled worker met no fence: it held nothing when it stopped"


@pytest.fixture
def own_kafka() -> Iterator[RunningBroker]:
    """A broker of this test's own: it is killed, and the session's broker serves others."""
    broker = start_kafka()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.mark.parametrize("number", range(RUNS))
def test_the_broker_killed_mid_transaction_and_restarted(own_kafka: RunningBroker,
                                                          tmp_path: Path, number: int) -> None:
    """The broker is killed while the worker works through a burst of input in batches of 20,
    so with transactions open, and started again BROKER_DOWN_S later on the same data."""
    seed = SEED + number
    rng = random.Random(seed)
    settings = eos_settings(own_kafka, f"eosbroker{seed}", tmp_path, batch_size=20,
                            stall_timeout=STALL_TIMEOUT)
    records = with_bad_lines(workload(ENTRIES, SESSIONS, seed=seed), rng)
    before, burst, after = thirds(records)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    started = time.monotonic()
    restarts = 0
    try:
        run(produce_once(settings, before))
        wait_until(lambda: committed_everything(settings), 90, "the first input committed")
        bursting = burst_under_way(worker, settings, burst)
        processed = worker.stats()["entries_in"]
        own_kafka.kill()
        killed_at = time.monotonic()
        time.sleep(BROKER_DOWN_S)
        own_kafka.restart()
        back_after = time.monotonic() - killed_at
        bursting.join(240)
        feeder = Feeder(settings, after, pause=0.5)
        feeder.run()
        assert feeder.error is None and bursting.error is None, feeder.error or bursting.error
        context = f"seed {seed}: broker killed with {processed} processed"

        def supervised() -> bool:
            nonlocal restarts
            if not worker.running():  # what a supervisor does
                restarts += 1
                worker.start(wait=False)
            return committed_everything(settings)

        with contextlib.suppress(TimeoutError):
            wait_until(supervised, 240, "the group's commits to reach the input's end")
        counts = assert_exactly_once(settings, context)
    finally:
        worker.stop()
    # a transaction was open while the broker was away: its requests failed, and were retried
    open_across = {"".join(found) for found in
                   TRANSACTION_REQUEST_FAILED.findall(worker.log_text())}
    print(f"\nexactly once through a broker SIGKILL with {processed} processed, seed {seed}: "
          f"{counts}; the broker answered {back_after:.0f}s after the kill; transactional "
          f"requests failed while it was away: {sorted(open_across)}; "
          f"{time.monotonic() - started:.0f}s")
    assert restarts == 0, worker.log_tail()
    assert open_across, "no transaction was open while the broker was away"
