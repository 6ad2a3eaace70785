"""The committer's order exactly once, against transactional producers in memory
(tests/support/transactions.py): a batch is one transaction per input partition holding its
outputs, its changelog and its input offset; acks follow the commits; a refused output aborts
the transaction, which is made again with the dead-letter notice; a fenced partition commits
nothing and its records are let go."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import orjson
import pytest
from aiokafka.errors import IllegalOperation, ProducerFenced

from stream.engine import KafkaOrigin
from stream.engine.tally import Tally
from stream.kafka.transactional import PartitionProducers
from stream.settings import Settings
from stream.worker.commit import Committer
from stream.worker.exactly_once import ExactlyOnce
from stream.worker.metrics import Readings, WorkerMetrics
from stream.worker.processor import OutRecord, ProcessedBatch
from stream.worker.tables import ChangelogRecord
from tests.support.transactions import Broker, FakeTransactionalProducer

SETTINGS = Settings.load(environ={}).replace(app_id="app", input_topic="in", clean_topic="clean",
                                             dlq_topic="dlq")
CHANGELOG = "app-sessions-changelog"


class Acks:
    def __init__(self, events: list) -> None:
        self.events = events

    def ack_all(self, messages) -> None:
        self.events += [("ack", m.name) for m in messages]

    def let_go(self, messages) -> None:
        self.events += [("let go", m.name) for m in messages]


def batch(name: str, partitions: dict[int, list[bytes]], *, changelog: bool = True,
          inputs: bool = True) -> tuple[ProcessedBatch, list]:
    """Outputs `partitions[p]` and a state write for each input partition p, processed from
    one input record of p at offset 10 * p + len(name)."""
    outputs, states, messages = [], [], []
    for partition, values in partitions.items():
        source = KafkaOrigin("in", partition, 10 * partition)
        outputs += [OutRecord("clean", partition, b"s", value, source) for value in values]
        if changelog:
            states.append(ChangelogRecord(CHANGELOG, partition, b"s", f"{name}-state".encode()))
        if inputs:
            messages.append(SimpleNamespace(name=f"{name}-{partition}", timestamp=None,
                                            partition=partition, offset=10 * partition + 5))
    return ProcessedBatch(outputs, states), messages


async def committer(broker: Broker, partitions: set[int]) -> tuple[Committer, list]:
    producers = PartitionProducers(
        lambda p: FakeTransactionalProducer(broker, f"app-in-{p}"), "fake")
    delivery = ExactlyOnce(SETTINGS, producers)
    await delivery.assigned(partitions)
    given_up: list = []

    async def give_up(lost: set[int]) -> None:
        given_up.append(sorted(lost))
        broker.events.append(("give up", sorted(lost)))

    metrics = WorkerMetrics(Readings(Tally(), dict, lambda: (0, 0), dict))
    return Committer(delivery, Acks(broker.events), metrics, give_up=give_up), given_up


def of(events: list, kinds: tuple[str, ...] = ("begin", "send", "offsets", "commit", "abort",
                                                 "ack", "let go", "give up")) -> list:
    return [event for event in events if event[0] in kinds]


async def test_a_batch_is_a_transaction_per_input_partition_and_its_acks_follow() -> None:
    broker = Broker()
    commits, _ = await committer(broker, {0, 1})
    broker.events.clear()
    await commits.commit(*batch("a", {0: [b"a0"], 1: [b"a1", b"a1b"]}), started=0.0)
    await commits.drain()
    for partition, values in ((0, ["a0"]), (1, ["a1", "a1b"])):
        mine = [e for e in broker.events if len(e) > 1 and e[1] == f"app-in-{partition}"]
        assert mine == [("begin", f"app-in-{partition}"),
                        *[("send", f"app-in-{partition}", "clean", v) for v in values],
                        ("send", f"app-in-{partition}", CHANGELOG, "a-state"),
                        ("offsets", f"app-in-{partition}", {partition: 10 * partition + 6}),
                        ("commit", f"app-in-{partition}")]
    acks = [i for i, e in enumerate(broker.events) if e[0] == "ack"]
    commits_at = [i for i, e in enumerate(broker.events) if e[0] == "commit"]
    assert len(acks) == 2 and min(acks) > max(commits_at)
    assert broker.read_committed("clean") == [b"a0", b"a1", b"a1b"]
    assert broker.offsets == {("in", 0): 6, ("in", 1): 16}


async def test_the_next_batch_begins_once_the_batch_before_is_committed_and_acked() -> None:
    broker = Broker(held=asyncio.Event())
    commits, _ = await committer(broker, {0})
    broker.events.clear()
    await commits.commit(*batch("a", {0: [b"a0"]}), started=0.0)
    second = asyncio.create_task(commits.commit(*batch("b", {0: [b"b0"]}), started=0.0))
    await asyncio.sleep(0.05)
    assert not second.done()
    assert ("begin", "app-in-0") in broker.events and not of(broker.events, ("ack",))
    assert [e for e in broker.events if e[0] == "send" and e[3] == "b0"] == []
    broker.held.set()
    await second
    await commits.drain()
    assert [e[0] for e in of(broker.events, ("commit", "ack", "begin"))] == [
        "begin", "commit", "ack", "begin", "commit", "ack"]


@pytest.mark.parametrize(("batch_bytes", "tries"), [
    (400, 2),  # larger than a producer batch, the output went in one of its own
    (2000, 3),  # in a batch with others: they go one per batch, then the notice
])
async def test_an_output_too_large_aborts_the_transaction_which_is_made_again_with_a_notice(
        batch_bytes: int, tries: int) -> None:
    broker = Broker(max_bytes=300, batch_bytes=batch_bytes)
    commits, _ = await committer(broker, {0})
    broker.events.clear()
    large = b"x" * 500
    await commits.commit(*batch("a", {0: [b"before", large, b"after"]}), started=0.0)
    await commits.drain()
    kinds = [e[0] for e in of(broker.events, ("begin", "offsets", "commit", "abort", "ack"))]
    assert kinds == ["begin", "abort"] * (tries - 1) + ["begin", "offsets", "commit", "ack"]
    # what a read-committed reader sees: each record once, the notice in place of the output
    assert broker.read_committed("clean") == [b"before", b"after"]
    (notice,) = broker.read_committed("dlq")
    letter = orjson.loads(notice)
    assert letter["raw_encoding"] == "omitted" and "larger than the broker accepts" in (
        letter["reason"])
    assert broker.read_committed(CHANGELOG) == [b"a-state"]
    assert broker.offsets == {("in", 0): 6}


async def test_a_fenced_partition_commits_nothing_and_its_records_are_let_go() -> None:
    broker = Broker()
    commits, given_up = await committer(broker, {0, 1})
    # another worker was given partition 1 and started its producer
    await FakeTransactionalProducer(broker, "app-in-1").start()
    broker.events.clear()
    await commits.commit(*batch("a", {0: [b"a0"], 1: [b"a1"]}), started=0.0)
    await commits.commit(*batch("b", {0: [b"b0"], 1: [b"b1"]}), started=0.0)
    await commits.drain()
    assert broker.read_committed("clean") == [b"a0", b"b0"]
    assert broker.offsets == {("in", 0): 6}
    assert of(broker.events, ("ack", "let go")) == [
        ("let go", "a-1"), ("ack", "a-0"), ("let go", "b-1"), ("ack", "b-0")]
    assert given_up == [[1], [1]]
    # no producer is started again for it before the next assignment: that would fence the
    # worker that owns it now
    assert [e for e in broker.events if e[0] == "begin" and e[1] == "app-in-1"] == []


async def test_a_producer_that_failed_mid_transaction_loses_its_partition_not_the_worker(
) -> None:
    """A stalled worker, resumed: its producer is fenced while a transaction is open, its
    sender ends, and aiokafka then refuses every send (IllegalOperation, not a KafkaError)."""
    broker = Broker()
    commits, given_up = await committer(broker, {0})
    producer = commits._delivery._producers.get(0)
    fenced = asyncio.get_running_loop().create_future()
    fenced.set_exception(ProducerFenced())

    async def refused(batch, topic, *, partition):
        producer._sender.sender_task = fenced  # the fence ended the sender mid-transaction
        raise IllegalOperation("Can't send messages while not in transaction")

    producer.send_batch = refused
    broker.events.clear()
    await commits.commit(*batch("a", {0: [b"a0"]}), started=0.0)
    await commits.drain()
    assert broker.read_committed("clean") == []
    assert of(broker.events, ("ack", "let go", "give up")) == [("let go", "a-0"),
                                                               ("give up", [0])]
    assert given_up == [[0]]


async def test_the_sweeps_tombstones_go_in_their_partitions_transaction() -> None:
    broker = Broker()
    commits, _ = await committer(broker, {2})
    broker.events.clear()
    sweep = ProcessedBatch([], [ChangelogRecord(CHANGELOG, 2, b"old", None)])
    await commits.commit(sweep, [], started=0.0)
    await commits.drain()
    assert of(broker.events) == [("begin", "app-in-2"),
                                 ("send", "app-in-2", CHANGELOG, "tombstone"),
                                 ("commit", "app-in-2")]
    assert broker.read_committed(CHANGELOG) == [None]


async def test_an_assignment_starts_a_producer_per_partition_and_fences_the_owner_before():
    broker = Broker()
    before, _ = await committer(broker, {0, 1})
    after, _ = await committer(broker, {1})  # the group moved partition 1
    broker.events.clear()
    await before.commit(*batch("a", {1: [b"late"]}), started=0.0)
    await after.commit(*batch("b", {1: [b"b1"]}), started=0.0)
    await before.drain()
    await after.drain()
    assert broker.read_committed("clean") == [b"b1"]
    assert of(broker.events, ("ack", "let go")) == [("let go", "a-1"), ("ack", "b-1")]
