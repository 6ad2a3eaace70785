"""The committer's order, against a producer that records what it is given: a batch's outputs,
then its changelog, then its acks; the next batch only after that; and what stops a commit."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from types import SimpleNamespace

import orjson
import pytest
from aiokafka.errors import MessageSizeTooLargeError, ProducerClosed

from stream.engine import KafkaOrigin
from stream.engine.tally import Tally
from stream.kafka.producer import DeliveryFailed
from stream.worker.commit import AtLeastOnce, Committer, EarlierCommitFailed
from stream.worker.metrics import Readings, WorkerMetrics
from stream.worker.processor import OutRecord, ProcessedBatch
from stream.worker.tables import ChangelogRecord

DLQ = "dead-letters"
TOO_LARGE = b"too large"


@dataclass
class FakeBatch:
    values: list[bytes | None] = field(default_factory=list)

    def append(self, *, key, value, timestamp, headers):
        self.values.append(value)
        return object()  # never full: the real producer's splitting is tested in test_sender

    def close(self) -> None:
        pass


@dataclass
class RecordingProducer:
    """Sends succeed at once, unless a topic is `held` (its futures wait for `release`),
    the value is TOO_LARGE (refused as the broker would), or the producer is `closed`."""

    log: list[tuple[str, str]]
    held: set[str] = field(default_factory=set)
    closed: bool = False
    _waiting: dict[str, list[asyncio.Future]] = field(default_factory=lambda: defaultdict(list))

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def create_batch(self) -> FakeBatch:
        return FakeBatch()

    async def send_batch(self, batch: FakeBatch, topic: str, *, partition: int):
        if self.closed:
            raise ProducerClosed()
        future = asyncio.get_running_loop().create_future()
        if TOO_LARGE in batch.values:
            future.set_exception(MessageSizeTooLargeError())
            return future
        self.log += [(topic, value.decode() if value else "tombstone") for value in batch.values]
        if topic in self.held:
            self._waiting[topic].append(future)
        else:
            future.set_result(None)
        return future

    def release(self, topic: str) -> None:
        self.held.discard(topic)
        for future in self._waiting.pop(topic, []):
            future.set_result(None)


@dataclass
class RecordingAcks:
    log: list[tuple[str, str]]

    def ack_all(self, messages) -> None:
        self.log += [("ack", message.name) for message in messages]

    def let_go(self, messages) -> None:
        self.log += [("let go", message.name) for message in messages]


def metrics() -> WorkerMetrics:
    return WorkerMetrics(Readings(Tally(), dict, lambda: (0, 0), dict))


def batch(name: str, *, outputs: int = 1, output: bytes | None = None) -> tuple:
    source = KafkaOrigin("events", 0, 0)
    values = [output or f"{name}-out{i}".encode() for i in range(outputs)]
    processed = ProcessedBatch(
        [OutRecord("clean", 0, name.encode(), value, source) for value in values],
        [ChangelogRecord("sessions-changelog", 0, name.encode(), f"{name}-state".encode())],
    )
    messages = [SimpleNamespace(name=f"{name}-in", timestamp=None, partition=0, offset=0)]
    return processed, messages


async def committer(log: list, producer: RecordingProducer | None = None) -> Committer:
    delivery = AtLeastOnce(lambda: producer or RecordingProducer(log), DLQ)
    await delivery.start()
    return Committer(delivery, RecordingAcks(log), metrics())


async def test_outputs_then_changelog_then_acks() -> None:
    log: list[tuple[str, str]] = []
    commits = await committer(log)
    await commits.commit(*batch("a", outputs=2), started=0.0)
    await commits.drain()
    assert log == [("clean", "a-out0"), ("clean", "a-out1"),
                   ("sessions-changelog", "a-state"), ("ack", "a-in")]


async def test_a_batch_waits_for_the_commit_of_the_one_before() -> None:
    log: list[tuple[str, str]] = []
    producer = RecordingProducer(log, held={"sessions-changelog"})
    commits = await committer(log, producer)
    await commits.commit(*batch("a"), started=0.0)  # nothing before it: returns at once
    second = asyncio.create_task(commits.commit(*batch("b"), started=0.0))
    await asyncio.sleep(0.05)
    # a's changelog is not in the broker: a is not acked, b has sent nothing and waits
    assert log == [("clean", "a-out0"), ("sessions-changelog", "a-state")]
    assert not second.done()
    producer.release("sessions-changelog")
    await second  # returns once a is committed
    await commits.drain()
    assert log == [("clean", "a-out0"), ("sessions-changelog", "a-state"), ("ack", "a-in"),
                   ("clean", "b-out0"), ("sessions-changelog", "b-state"), ("ack", "b-in")]


async def test_an_output_the_broker_refuses_as_too_large_goes_as_a_dead_letter() -> None:
    log: list[tuple[str, str]] = []
    commits = await committer(log)
    await commits.commit(*batch("a", output=TOO_LARGE), started=0.0)
    await commits.drain()
    assert [topic for topic, _ in log] == [DLQ, "sessions-changelog", "ack"]
    notice = orjson.loads(log[0][1])
    assert notice["raw_encoding"] == "omitted" and "larger than the broker accepts" in (
        notice["reason"])


async def test_a_stopped_producer_fails_the_commit_and_every_later_one_unacked() -> None:
    log: list[tuple[str, str]] = []
    producer = RecordingProducer(log, closed=True)
    commits = await committer(log, producer)
    await commits.commit(*batch("a"), started=0.0)
    with pytest.raises(DeliveryFailed):
        await commits.commit(*batch("b"), started=0.0)
    with pytest.raises(EarlierCommitFailed):
        await commits.drain()
    assert log == []  # nothing sent, nothing acked: Faust commits none of these offsets
