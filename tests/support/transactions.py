"""A broker and transactional producers in memory, as the worker's exactly-once delivery sees
them: transactions per transactional id, fenced by a later start of the same id, sequence
numbers per topic partition that a refused batch leaves ahead of the broker's (as aiokafka
0.14 and Apache Kafka do), and what a read-committed reader then sees."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from types import SimpleNamespace

from aiokafka import TopicPartition
from aiokafka.errors import MessageSizeTooLargeError, OutOfOrderSequenceNumber, ProducerFenced


@dataclass
class Appended:
    transactional_id: str
    epoch: int
    number: int  # the transaction's number for its id
    tp: TopicPartition
    value: bytes | None


@dataclass
class Broker:
    """`max_bytes`: a value longer than this is refused as too large; `batch_bytes`: what a
    producer batch takes before it is full (its first value, however large)."""

    max_bytes: int = 1000
    batch_bytes: int = 2000
    log: list[Appended] = field(default_factory=list)
    epochs: dict[str, int] = field(default_factory=dict)
    sequences: dict[tuple[str, TopicPartition], int] = field(default_factory=dict)
    committed: set[tuple[str, int, int]] = field(default_factory=set)
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    events: list[tuple] = field(default_factory=list)  # what the producers did, in order
    held: asyncio.Event | None = None  # while set to an unset event, commits wait for it

    def read_committed(self, topic: str) -> list[bytes | None]:
        return [a.value for a in self.log if a.tp.topic == topic
                and (a.transactional_id, a.epoch, a.number) in self.committed]


class FakeBatch:
    def __init__(self, size: int) -> None:
        self.size = size
        self.values: list[bytes | None] = []

    def append(self, *, key, value, timestamp, headers):
        taken = sum(len(v or b"") for v in self.values)
        if self.values and taken + len(value or b"") > self.size:
            return None
        self.values.append(value)
        return object()

    def close(self) -> None:
        pass


class FakeTransactionalProducer:
    def __init__(self, broker: Broker, transactional_id: str) -> None:
        self.broker = broker
        self.transactional_id = transactional_id
        self.epoch = -1
        self.number = 0
        # what stream.kafka.internals reads and sets, as aiokafka's producer has it
        self._txn_manager = SimpleNamespace(_sequence_numbers=defaultdict(int),
                                            _transaction_waiter=None)
        self._txn_manager.sequence_number = lambda tp: self._txn_manager._sequence_numbers[tp]
        self._sender = SimpleNamespace(sender_task=None)
        self._message_accumulator = SimpleNamespace(_batches={}, _pending_batches=set())

    def _check(self) -> None:
        if self.broker.epochs.get(self.transactional_id) != self.epoch:
            raise ProducerFenced()

    async def start(self) -> None:
        self.epoch = self.broker.epochs.get(self.transactional_id, -1) + 1
        self.broker.epochs[self.transactional_id] = self.epoch
        self.broker.sequences = {key: seq for key, seq in self.broker.sequences.items()
                                 if key[0] != self.transactional_id}
        self._txn_manager._sequence_numbers.clear()
        self.broker.events.append(("start", self.transactional_id))

    async def stop(self) -> None:
        pass

    def create_batch(self) -> FakeBatch:
        return FakeBatch(self.broker.batch_bytes)

    async def begin_transaction(self) -> None:
        self._check()
        self.number += 1
        self.broker.events.append(("begin", self.transactional_id))

    async def send_batch(self, batch: FakeBatch, topic: str, *, partition: int):
        tp = TopicPartition(topic, partition)
        numbers = self._txn_manager._sequence_numbers
        sequence = numbers[tp]
        numbers[tp] += len(batch.values)  # taken when the batch is drained, as aiokafka does
        future = asyncio.get_running_loop().create_future()
        expected = self.broker.sequences.get((self.transactional_id, tp), 0)
        if self.broker.epochs.get(self.transactional_id) != self.epoch:
            future.set_exception(ProducerFenced())
        elif sequence != expected:
            future.set_exception(OutOfOrderSequenceNumber())
        elif any(len(v or b"") > self.broker.max_bytes for v in batch.values):
            future.set_exception(MessageSizeTooLargeError())
        else:
            self.broker.sequences[(self.transactional_id, tp)] = expected + len(batch.values)
            for value in batch.values:
                self.broker.log.append(Appended(self.transactional_id, self.epoch, self.number,
                                                tp, value))
            self.broker.events += [("send", self.transactional_id, topic,
                                    value.decode() if value else "tombstone")
                                   for value in batch.values]
            future.set_result(None)
        return future

    async def send_offsets_to_transaction(self, offsets, group_id: str) -> None:
        self._check()
        self.pending_offsets = dict(offsets)
        self.broker.events.append(("offsets", self.transactional_id,
                                   {tp.partition: o for tp, o in offsets.items()}))

    async def commit_transaction(self) -> None:
        self._check()
        if self.broker.held is not None:
            await self.broker.held.wait()
        self._check()
        self.broker.committed.add((self.transactional_id, self.epoch, self.number))
        self.broker.offsets.update(getattr(self, "pending_offsets", {}))
        self.pending_offsets = {}
        self.broker.events.append(("commit", self.transactional_id))

    async def abort_transaction(self) -> None:
        self._check()
        self.pending_offsets = {}
        self.broker.events.append(("abort", self.transactional_id))
