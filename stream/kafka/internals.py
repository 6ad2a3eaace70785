"""Every place the project reaches into Faust's or aiokafka's private API, and why.

The worker keeps Faust for its consumer group, table recovery and (at least once) offset
commits, and takes its input through a batch lane beside Faust's per-event path
(stream.worker.lane); that, its transactions (stream.kafka.transactional) and two broker quirks
need some of the libraries' internals. Every reach is here and nowhere
else, and each is listed in `TOUCH_POINTS` with the version of the library it was read from
and what to re-check when that version changes: `tests/kafka/test_internals.py` fails when
the installed faust-streaming or aiokafka is not the version a touch point was written for
(naming what to re-check), and when a name one relies on is gone.

Nothing here runs at import, and neither library is imported at module level: the tools'
consumers (stream.kafka.consumer) use one touch point, and loading Faust for it would be waste.
The worker applies the two patches at its start-up (`install_worker_patches`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, MutableMapping, MutableSet, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import chain
from typing import TYPE_CHECKING, Any, Final, cast

from stream.kafka.ends import record_ends

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.consumer.group_coordinator import GroupCoordinator

log = logging.getLogger(__name__)

FAUST: Final = "faust-streaming"
AIOKAFKA: Final = "aiokafka"


@dataclass(frozen=True)
class TouchPoint:
    reach: str  # the private name (or private behaviour) relied on
    library: str  # its distribution: FAUST or AIOKAFKA
    version: str  # the version it was read from
    recheck: str  # what to read again in a new version before moving `version` on


TOUCH_POINTS: Final = (
    TouchPoint("Consumer._unacked_messages", FAUST, "0.15.3",
               "a rebalance and a stop still wait until it is empty (stream_wait_empty): the "
               "lane's records count as in flight there until acked"),
    TouchPoint("Consumer._add_gap(tp, offset_from, offset_to)", FAUST, "0.15.3",
               "the range is still inclusive and commits still pass gaps"),
    TouchPoint("Consumer._committed_offset", FAUST, "0.15.3",
               "it still holds the group's committed offset per partition (lag of a partition "
               "not processed yet)"),
    TouchPoint("Consumer.getmany (overridden by the lane)", FAUST, "0.15.3",
               "Faust's fetcher still takes every record through it, after its own read-offset "
               "and gap bookkeeping, and cancels it to stop; it still drops, without seeking "
               "back, records of a fetch that ends while the flow is stopped, the generation "
               "changed or the partition is paused (the lane seeks back: "
               "stream.worker.read_positions)"),
    TouchPoint("Consumer._wait_next_records (overridden by the lane)", FAUST, "0.15.3",
               "it still returns a fetch as a dict of lists of aiokafka records per partition, "
               "with the partitions getmany hands on (None: all), every record the aiokafka "
               "consumer hands on passes through it, and getmany still takes no record of a "
               "fetch while the flow is stopped"),
    TouchPoint("Consumer.seek_wait, earliest_offsets (called), on_partitions_revoked, "
               "on_partitions_assigned (overridden)", FAUST, "0.15.3",
               "seek_wait still seeks in the consumer's thread and waits for the position, and "
               "the rebalance callbacks still run before the new assignment's records are "
               "handed on (the lane forgets its read positions there)"),
    TouchPoint("AIOKafkaConsumerThread._ensure_consumer, call_thread", FAUST, "0.15.3",
               "the aiokafka consumer still lives in the thread and is reached through them "
               "(committed_offsets)"),
    TouchPoint("Consumer._buffered_partitions", FAUST, "0.15.3",
               "getmany still hands on the records of these partitions as of active ones"),
    TouchPoint("Transport.Consumer (replaced)", FAUST, "0.15.3",
               "the transport still makes its consumer from this class attribute"),
    TouchPoint("Consumer._new_consumer_thread (overridden)", FAUST, "0.15.3",
               "the consumer still makes its thread there, with loop= and beacon="),
    TouchPoint("AIOKafkaConsumerThread._create_worker_consumer (overridden)", FAUST, "0.15.3",
               "it still returns the aiokafka consumer before it is started"),
    TouchPoint("AIOKafkaConsumerThread._highwaters (replaced)", FAUST, "0.15.3",
               "recovery still asks it for the changelog ends, with a list of partitions"),
    TouchPoint("Recovery.active_tps, standby_tps, active_offsets, standby_offsets", FAUST,
               "0.15.3", "the offsets are still the newest applied per partition, and recovery "
               "is done when they reach the highwaters"),
    TouchPoint("Recovery.flush_buffers, tp_to_table", FAUST, "0.15.3",
               "buffered changelog events are still applied by flush_buffers, and tp_to_table "
               "still maps a changelog partition to its table"),
    TouchPoint("memory Store.apply_changelog_batch, _key_partition", FAUST, "0.15.3",
               "for raw keys and values it still stores each record's value as it is and "
               "deletes a key whose record has none, and it still records each restored key's "
               "partition in _key_partition for on_recovery_completed, which drops the keys of "
               "partitions not assigned"),
    TouchPoint("Monitor.stream_inbound_time", FAUST, "0.15.3",
               "the slow-processing checks still read when a stream last took a record there"),
    TouchPoint("memory Store .data (Table.data.data)", FAUST, "0.15.3",
               "a memory:// table is still a plain dict behind its store"),
    TouchPoint("Consumer._commit (overridden by the lane)", FAUST, "0.15.3",
               "every offset commit of Faust's consumer (its timer, a rebalance, a stop) still "
               "goes through it, and a False result still leaves Faust's own bookkeeping "
               "(_committed_offset) as after a commit: exactly once, the transactions commit "
               "the offsets and Faust must not"),
    TouchPoint("Recovery.revoke(tp)", FAUST, "0.15.3",
               "it still forgets the partition's recovered offset, so the next assignment "
               "restores the changelog partition from its start"),
    TouchPoint("AIOKafkaConsumer._isolation_level (set before start)", AIOKAFKA, "0.14.0",
               "start() still hands it to the fetcher it makes, as the string the constructor "
               "takes"),
    TouchPoint("AIOKafkaConsumer._coordinator.request_rejoin", AIOKAFKA, "0.14.0",
               "the coordination routine still rejoins the group (revoking the assignment "
               "first) once it is called, from the consumer's own event loop"),
    TouchPoint("AIOKafkaProducer._txn_manager.sequence_number, _sequence_numbers (set back)",
               AIOKAFKA, "0.14.0",
               "a batch still takes its sequence numbers when it is drained and keeps them when "
               "the broker refuses it, and after an abort the next transaction still goes on "
               "from the broker's sequence (the producer's epoch unchanged: InitProducerId v0)"),
    TouchPoint("AIOKafkaProducer._sender.sender_task, _txn_manager._transaction_waiter, "
               "_message_accumulator._batches, _pending_batches, MessageBatch._drain_waiter",
               AIOKAFKA, "0.14.0",
               "a fenced producer's sender still ends with the error (and puts the transaction "
               "manager in its fatal state), and the transaction waiter and the unsent batches' "
               "drain waiters still hold that error"),
    TouchPoint("AIOKafkaConsumer.seek_to_committed (behaviour)", AIOKAFKA, "0.14.0",
               "it still seeks only partitions with a committed offset above 0, leaving a "
               "partition without one where its fetch position was (which is why the lane "
               "places partitions itself: stream.worker.read_positions)"),
    TouchPoint("AIOKafkaConsumer._fetch_max_wait_ms", AIOKAFKA, "0.14.0",
               "start() still reads it when it makes the fetcher"),
    TouchPoint("AIOKafkaConsumer._client.force_metadata_update", AIOKAFKA, "0.14.0",
               "partitions_for_topic still reads the metadata that refresh stores"),
    TouchPoint("GroupCoordinator._maybe_leave_group, _send_req, generation, "
               "_group_instance_id (patched)", AIOKAFKA, "0.14.0",
               "LeaveGroup is still sent only from a generation above 0"),
)

# aiokafka: what the consumer asks a broker to hold a fetch for.
FETCH_MAX_WAIT_ATTRIBUTE: Final = "_fetch_max_wait_ms"


# --- Faust's consumer, as the lane uses it ---------------------------------------------------


def unacked_messages(consumer: Any) -> MutableSet[Any]:
    return cast(MutableSet[Any], consumer._unacked_messages)


async def add_gap(consumer: Any, tp: Any, first: int, last: int) -> None:
    """Offsets `first`..`last` (inclusive) will never be delivered: commits may pass them."""
    await consumer._add_gap(tp, first, last)


def buffered(consumer: Any, tp: Any) -> bool:
    """Whether getmany hands on `tp`'s records though it is not among the active partitions."""
    return tp in consumer._buffered_partitions


async def committed_offsets(consumer: Any, tps: Sequence[Any]) -> dict[Any, int | None]:
    """The group's committed offset of each of `tps` (None: no commit), asked of the aiokafka
    consumer in the thread it runs in."""
    thread = consumer._thread
    aiokafka_consumer = thread._ensure_consumer()
    offsets: dict[Any, int | None] = {}
    for tp in tps:
        offsets[tp] = await thread.call_thread(aiokafka_consumer.committed, tp)
    return offsets


def committed_offset(consumer: Any, tp: Any) -> int | None:
    offset = consumer._committed_offset.get(tp)
    return offset if isinstance(offset, int) else None


def table_dict(table: Any) -> dict[bytes, bytes]:
    """The dict behind a memory:// Faust table: its mapping API costs a Python call per
    access and an exception per miss."""
    return cast(dict, table.data.data)


def mark_inbound(app: Any, tps: Iterable[Any], now: float) -> None:
    """Tell Faust's slow-processing checks that a stream took a record of each of `tps`."""
    inbound = app.monitor.stream_inbound_time
    for tp in tps:
        inbound[tp] = now


async def request_rejoin(consumer: Any) -> None:
    """Make the consumer rejoin its group: its assignment is revoked (once the batches in
    delivery are committed) and a new one given."""
    thread = consumer._thread
    aiokafka_consumer = thread._ensure_consumer()

    async def rejoin() -> None:
        aiokafka_consumer._coordinator.request_rejoin()

    await thread.call_thread(rejoin)


# --- Faust's table recovery, as the lane's batch restore uses it -----------------------------


def forget_recovered(app: Any, tps: Iterable[Any]) -> None:
    """Changelog partitions whose table values were dropped: the next assignment restores each
    from its start, not from where recovery last stood."""
    recovery = app.tables.recovery
    for tp in tps:
        recovery.revoke(tp)


def recovery_offsets(app: Any, tp: Any) -> MutableMapping[Any, int] | None:
    """The offsets recovery has applied (per partition) for the table partition `tp` is
    recovered into, active or standby; None when `tp` is not being recovered."""
    recovery = app.tables.recovery
    if tp in recovery.active_tps:
        return cast(MutableMapping[Any, int], recovery.active_offsets)
    if tp in recovery.standby_tps:
        return cast(MutableMapping[Any, int], recovery.standby_offsets)
    return None


def apply_changelog(app: Any, tp: Any, messages: Sequence[Any]) -> None:
    """Apply changelog `messages` of `tp` to its memory:// table at once, after the records
    Faust's recovery buffered, so they apply in offset order.

    They are written straight into the store's dict, as its `apply_changelog_batch` would
    leave it for raw keys and values (a record without a value deletes its key), and into the
    store's map of each restored key's partition, which its `on_recovery_completed` reads to
    drop the keys of partitions not assigned here. Through Faust's batch call a record cost
    four times as much (an event object, `to_key`, `to_value`, a generator step): 1-2 s of a
    restart with a million sessions (docs/performance.md)."""
    recovery = app.tables.recovery
    recovery.flush_buffers()
    table = recovery.tp_to_table[tp]
    data = table_dict(table)
    partitions: dict[Any, int] = table.data._key_partition
    partition = tp.partition
    for message in messages:
        key, value = message.key, message.value
        if value is None:
            data.pop(key, None)
            partitions.pop(key, None)
        else:
            data[key] = value
            partitions[key] = partition


# --- where the lane's consumer and the fetch wait are put in ---------------------------------


@cache
def lane_transport(consumer_class: type, fetch_max_wait_ms: int) -> type:
    """Faust's aiokafka transport, making a `consumer_class` (a subclass of Faust's aiokafka
    Consumer) whose aiokafka consumer reads committed records only and holds a fetch
    `fetch_max_wait_ms` at most, whose `take_fetch(records, active partitions)` sees every
    fetch before Faust's getmany loop does, and which commits no offset while its
    `offsets_in_transactions()` says the transactions do. An app takes it through its public
    `transport` setter.

    Read committed: a changelog restored, or an input read, never yields what an aborted
    transaction wrote (Faust reads committed only in its own exactly-once mode, whose
    transaction manager must not run beside the worker's).

    Faust asks brokers to hold a fetch up to 1.5 s for new data, and aiokafka sends a broker
    no fetch while one is in flight: one partition at its end (an idle session, a small
    partition) then held every other partition on that broker for 1.5 s per round. Brokers
    still answer at once when data is there.
    """
    from faust.transport.drivers import aiokafka as driver

    class ConsumerThread(driver.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            set_fetch_max_wait(consumer, fetch_max_wait_ms)
            read_committed(consumer)
            return consumer

    class Consumer(consumer_class):  # type: ignore[valid-type, misc]
        def _new_consumer_thread(self) -> Any:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

        async def _wait_next_records(self, timeout: float) -> tuple[Any, Any]:
            records, active = await super()._wait_next_records(timeout)
            if records:
                self.take_fetch(records, active)
            return records, active

        async def _commit(self, offsets: Any) -> bool:
            if self.offsets_in_transactions():
                return False
            return bool(await super()._commit(offsets))

    class Transport(driver.Transport):
        pass

    Transport.Consumer = Consumer
    return Transport


def set_fetch_max_wait(consumer: AIOKafkaConsumer, milliseconds: int) -> None:
    """Before the consumer starts: its fetcher reads the value when it is created."""
    setattr(consumer, FETCH_MAX_WAIT_ATTRIBUTE, milliseconds)


def read_committed(consumer: AIOKafkaConsumer) -> None:
    """Before the consumer starts: its fetcher reads the isolation level when it is created."""
    consumer._isolation_level = "read_committed"


# --- aiokafka --------------------------------------------------------------------------------


def sequences(producer: AIOKafkaProducer, tps: Iterable[Any]) -> dict[Any, int]:
    """The sequence number the producer gives its next batch of each topic partition."""
    manager = producer._txn_manager
    return {tp: manager.sequence_number(tp) for tp in tps}


def set_sequences(producer: AIOKafkaProducer, sequences: Mapping[Any, int]) -> None:
    """Set the producer's next sequence numbers back to the broker's, after an aborted
    transaction in which the broker refused a batch: the refused batch took its numbers, the
    broker did not append it, and the next batch would be refused as out of order."""
    numbers = producer._txn_manager._sequence_numbers
    for tp, sequence in sequences.items():
        numbers[tp] = sequence


def transaction_failure(producer: AIOKafkaProducer) -> BaseException | None:
    """What ended the producer's sender for good (a fence, an error no retry cures): its
    transactions can do nothing more. None while it runs."""
    task = producer._sender.sender_task
    if task is None or not task.done() or task.cancelled():
        return None
    return task.exception()


def forget_transaction_failure(producer: AIOKafkaProducer) -> None:
    """The failure is known: asyncio need not report, as the loop closes, the futures that hold
    it too and that nothing awaits once the producer is dropped: the transaction's waiter, and
    the drain waiters of the batches the failed sender never sent (an error with its traceback
    each)."""
    manager = producer._txn_manager
    waiters = [getattr(manager, "_transaction_waiter", None)] if manager is not None else []
    accumulator = producer._message_accumulator
    for batch in [*chain.from_iterable(accumulator._batches.values()),
                  *accumulator._pending_batches]:
        waiters.append(batch._drain_waiter)
    for waiter in waiters:
        if waiter is not None and waiter.done() and not waiter.cancelled():
            waiter.exception()


async def refresh_metadata(consumer: AIOKafkaConsumer) -> None:
    """The public topics() fetches metadata without storing it where partitions_for_topic
    looks; with no topic assigned yet, this refresh covers every topic."""
    await consumer._client.force_metadata_update()


# --- the worker's two process-wide patches ---------------------------------------------------


def install_worker_patches(client_options: Mapping[str, Any]) -> None:
    """Applied once, at the worker's start-up, before Faust makes its consumer."""
    _leave_group_from_generation_zero()
    _recovery_highwaters_from_fetches(client_options)


def _leave_group_from_generation_zero() -> None:
    """A stopping worker leaves its consumer group on every broker, Tansu included.

    aiokafka sends LeaveGroup only from a generation above 0, as Apache Kafka numbers them
    from 1; Tansu numbers them from 0, so a worker that stopped in its group's first
    generation stayed a member until its session timed out, and a restarted worker waited
    that long before it could process again. Generation 0 is a real one only on such brokers,
    so leaving from it is right everywhere.
    """
    from aiokafka.consumer.group_coordinator import GroupCoordinator
    from aiokafka.errors import KafkaError
    from aiokafka.protocol.group import LeaveGroupRequest

    original = GroupCoordinator._maybe_leave_group
    if getattr(original, "leaves_generation_zero", False):
        return

    async def _maybe_leave_group(self: GroupCoordinator) -> None:
        if self.generation == 0 and self._group_instance_id is None:
            try:
                await self._send_req(LeaveGroupRequest(self.group_id, self.member_id))
            except KafkaError as error:
                log.warning("LeaveGroup from generation 0 failed: %s", error)
        await original(self)

    _maybe_leave_group.leaves_generation_zero = True  # type: ignore[attr-defined]
    GroupCoordinator._maybe_leave_group = _maybe_leave_group  # type: ignore[method-assign]


def _recovery_highwaters_from_fetches(client_options: Mapping[str, Any]) -> None:
    """Changelog end offsets that Faust's table recovery can trust on every broker.

    Faust's recovery is done when it has applied the record before the end it was given.
    Tansu answers ListOffsets(latest) with "base offset of the newest batch + 1", not the log
    end, so Faust stopped recovering a table early and lost its newest updates; a fetch from
    that offset carries the true high watermark. And a changelog written in transactions ends
    in a commit marker, which holds an offset but is never read, so recovery would never be
    done: the end given is the one after the last committed record (`record_ends`).
    """
    from aiokafka import TopicPartition
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    options = dict(client_options)

    async def _highwaters(self: AIOKafkaConsumerThread, partitions: Sequence[Any]):
        ends = await record_ends(options, partitions)
        return {tp: ends[TopicPartition(tp.topic, tp.partition)] for tp in partitions}

    AIOKafkaConsumerThread._highwaters = _highwaters  # type: ignore[method-assign]
