"""The fence around Faust's and aiokafka's internals (`stream.kafka.internals`): each touch
point was written for the installed version, and every private name it relies on is there.

An upgrade fails here, naming the touch points to re-check, instead of deep inside a running
worker (a lost gap, a stalled commit, a patch that silently stops applying).
"""

from __future__ import annotations

import asyncio
import inspect
from importlib.metadata import version
from types import SimpleNamespace

import faust
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.consumer.group_coordinator import GroupCoordinator
from aiokafka.producer.message_accumulator import MessageAccumulator, MessageBatch
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from stream.kafka import internals
from stream.worker.commit import AtLeastOnce, Committer
from stream.worker.lane import LaneApp, LaneConsumer


@pytest.fixture(scope="module")
def app() -> faust.App:
    # Built, never started: no broker is needed to read its consumer's attributes.
    return faust.App("internals-check", broker="kafka://127.0.0.1:1", autodiscover=False)


@pytest.mark.parametrize("library", [internals.FAUST, internals.AIOKAFKA])
def test_each_touch_point_was_written_for_the_installed_version(library: str) -> None:
    installed = version(library)
    stale = [point for point in internals.TOUCH_POINTS
             if point.library == library and point.version != installed]
    assert not stale, f"{library} {installed} is installed; re-check, in its source:\n" + "\n".join(
        f"- {point.reach} (read from {point.version}): {point.recheck}" for point in stale
    ) + "\nthen set each touch point's version in stream/kafka/internals.py to " + installed


def test_every_touch_point_names_a_known_library() -> None:
    assert {point.library for point in internals.TOUCH_POINTS} == {
        internals.FAUST, internals.AIOKAFKA}


def moved(what: str) -> str:
    installed = {name: version(name) for name in (internals.FAUST, internals.AIOKAFKA)}
    return (f"{what} is gone (installed {installed}); see its touch point in "
            "stream/kafka/internals.py")


@pytest.mark.parametrize("attribute", [
    "_unacked_messages", "_committed_offset", "_add_gap",
    "_new_consumer_thread",
])
def test_faust_consumer_internals(app: faust.App, attribute: str) -> None:
    assert hasattr(app.consumer, attribute), moved(f"Faust Consumer.{attribute}")


def test_faust_add_gap_takes_a_partition_and_an_inclusive_range(app: faust.App) -> None:
    parameters = list(inspect.signature(app.consumer._add_gap).parameters)
    assert parameters == ["tp", "offset_from", "offset_to"], moved("Consumer._add_gap(tp, a, b)")


@pytest.mark.parametrize(("owner", "attribute"), [
    (faust_aiokafka.AIOKafkaConsumerThread, "_create_worker_consumer"),
    (faust_aiokafka.AIOKafkaConsumerThread, "_highwaters"),
    (faust_aiokafka.Transport, "Consumer"),
    (faust_aiokafka.Consumer, "getmany"),
    (faust_aiokafka.Consumer, "seek_wait"),
    (faust_aiokafka.Consumer, "earliest_offsets"),
    (faust_aiokafka.Consumer, "on_partitions_revoked"),
    (faust_aiokafka.Consumer, "on_partitions_assigned"),
    (faust_aiokafka.Consumer, "_commit"),
    (faust_aiokafka.AIOKafkaConsumerThread, "_ensure_consumer"),
    (faust_aiokafka.AIOKafkaConsumerThread, "call_thread"),
    (GroupCoordinator, "_maybe_leave_group"),
    (GroupCoordinator, "_send_req"),
    (GroupCoordinator, "request_rejoin"),
])
def test_overridden_and_patched_methods(owner: type, attribute: str) -> None:
    assert hasattr(owner, attribute), moved(f"{owner.__qualname__}.{attribute}")


async def test_the_fetch_wait_is_an_attribute_read_when_the_fetcher_is_made() -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1")
    assert hasattr(consumer, internals.FETCH_MAX_WAIT_ATTRIBUTE), moved("fetch_max_wait_ms")
    assert "self._fetch_max_wait_ms" in inspect.getsource(AIOKafkaConsumer.start), moved(
        "AIOKafkaConsumer.start reading _fetch_max_wait_ms")
    assert hasattr(consumer, "_client"), moved("AIOKafkaConsumer._client")
    assert hasattr(consumer._client, "force_metadata_update"), moved("force_metadata_update")


async def test_the_isolation_level_is_an_attribute_read_when_the_fetcher_is_made() -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1")
    internals.read_committed(consumer)
    assert consumer._isolation_level == "read_committed", moved("AIOKafkaConsumer._isolation_level")
    assert "isolation_level=self._isolation_level" in inspect.getsource(
        AIOKafkaConsumer.start), moved("AIOKafkaConsumer.start passing _isolation_level")
    assert "_coordinator" in inspect.getsource(AIOKafkaConsumer.start), moved(
        "AIOKafkaConsumer._coordinator")


async def test_a_transactional_producer_keeps_what_the_transactions_read_and_set() -> None:
    producer = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", transactional_id="check")
    manager = producer._txn_manager
    assert hasattr(manager, "_sequence_numbers"), moved("TransactionManager._sequence_numbers")
    assert hasattr(producer._sender, "sender_task"), moved("Sender.sender_task")
    accumulator = producer._message_accumulator
    assert hasattr(accumulator, "_batches") and hasattr(accumulator, "_pending_batches"), moved(
        "MessageAccumulator._batches, _pending_batches")
    assert "self._drain_waiter.set_exception(exception)" in inspect.getsource(
        MessageBatch.failure), moved("MessageBatch._drain_waiter")
    tp = TopicPartition("t", 0)
    internals.set_sequences(producer, {tp: 7})
    assert internals.sequences(producer, [tp]) == {tp: 7}
    assert internals.transaction_failure(producer) is None  # not started
    internals.forget_transaction_failure(producer)  # nothing to forget
    source = inspect.getsource(MessageAccumulator._pop_batch)
    assert "increment_sequence_number(batch.tp, batch.record_count)" in source, moved(
        "a batch taking its sequence numbers when drained")
    assert "_transaction_waiter" in inspect.getsource(type(manager).fatal_error), moved(
        "TransactionManager._transaction_waiter")
    await producer.stop()


def test_seek_to_committed_leaves_a_partition_without_a_commit_where_it_was() -> None:
    """Why the lane places partitions itself (stream.worker.read_positions): when aiokafka seeks
    uncommitted partitions too, the touch point's reason is gone."""
    source = inspect.getsource(AIOKafkaConsumer.seek_to_committed)
    assert "if offset and offset > 0:" in source, moved("seek_to_committed's condition")


def test_group_coordinator_fields_of_the_leave_group_patch() -> None:
    source = inspect.getsource(GroupCoordinator.__init__)
    for field in ("self._group_instance_id", "self.generation", "self.member_id"):
        assert field in source, moved(f"GroupCoordinator {field}")


def test_recovery_and_monitor_fields_the_lane_reads(app: faust.App) -> None:
    recovery = app.tables.recovery
    for field in ("active_tps", "standby_tps", "active_offsets", "standby_offsets",
                  "flush_buffers", "tp_to_table", "revoke"):
        assert hasattr(recovery, field), moved(f"Recovery.{field}")
    assert hasattr(app.monitor, "stream_inbound_time"), moved("Monitor.stream_inbound_time")


def test_the_lane_app_makes_lane_consumers_with_the_shorter_fetch_wait() -> None:
    app = LaneApp("internals-lane", broker="kafka://127.0.0.1:1", autodiscover=False,
                  delivery=AtLeastOnce(AIOKafkaProducer, "dlq"), make_committer=Committer)
    consumer = app.lane_consumer
    assert isinstance(consumer, LaneConsumer)
    thread = consumer._new_consumer_thread()
    assert isinstance(thread, faust_aiokafka.AIOKafkaConsumerThread)
    overridden = type(thread)._create_worker_consumer
    assert overridden is not faust_aiokafka.AIOKafkaConsumerThread._create_worker_consumer
    assert type(consumer)._commit is not faust_aiokafka.Consumer._commit


async def test_exactly_once_faust_commits_no_offset_and_keeps_its_bookkeeping() -> None:
    """The lane's consumer commits nothing while the delivery's transactions commit the
    offsets, and Faust's commit then still moves its own committed offset to the acks."""
    app = LaneApp("internals-eos", broker="kafka://127.0.0.1:1", autodiscover=False,
                  delivery=SimpleNamespace(offsets_in_transactions=True),
                  make_committer=Committer)
    assert await app.lane_consumer._commit({TP("input", 0): 5}) is False
    assert "self._committed_offset.update(committable_offsets)" in inspect.getsource(
        faust_aiokafka.Consumer._commit_offsets), moved("Faust's bookkeeping after a commit")


def test_a_memory_table_is_a_dict_behind_its_store(app: faust.App) -> None:
    table = app.Table("internals-check-table", key_type=bytes, value_type=bytes)
    assert isinstance(internals.table_dict(table), dict), moved("memory Store.data")


def test_a_batch_restore_leaves_a_memory_table_as_faust_own_restore_does(app: faust.App) -> None:
    """`apply_changelog` writes into the store's dict and partition map itself: the table it
    leaves, and what Faust's end of recovery then drops, must be what Faust's batch call and
    its end of recovery leave (a key set and deleted, set again, on two partitions)."""
    records = [(0, b"a", b"1"), (0, b"b", b"2"), (0, b"a", None), (1, b"c", b"3"),
               (0, b"b", b"4"), (1, b"d", b"5"), (1, b"d", None), (1, b"d", b"6")]
    direct = app.Table("internals-direct", key_type=bytes, value_type=bytes, partitions=2)
    faust_own = app.Table("internals-faust", key_type=bytes, value_type=bytes, partitions=2)
    for partition in (0, 1):
        tp = TP(direct.changelog_topic_name, partition)
        messages = [SimpleNamespace(key=key, value=value, partition=partition, offset=offset)
                    for offset, (p, key, value) in enumerate(records) if p == partition]
        recovery = SimpleNamespace(flush_buffers=lambda: None, tp_to_table={tp: direct})
        internals.apply_changelog(SimpleNamespace(tables=SimpleNamespace(recovery=recovery)),
                                  tp, messages)
        faust_own.apply_changelog_batch([SimpleNamespace(key=m.key, value=m.value, message=m)
                                         for m in messages])
    assert internals.table_dict(direct) == internals.table_dict(faust_own) == {
        b"b": b"4", b"c": b"3", b"d": b"6"}

    only_partition_0 = {TP("input", 0)}
    for table in (direct, faust_own):
        asyncio.run(table.data.on_recovery_completed(only_partition_0, set()))
    assert internals.table_dict(direct) == internals.table_dict(faust_own) == {b"b": b"4"}


def test_the_patches_apply_once_and_only_when_asked() -> None:
    original = GroupCoordinator._maybe_leave_group
    highwaters = faust_aiokafka.AIOKafkaConsumerThread._highwaters
    try:
        assert not getattr(original, "leaves_generation_zero", False)
        internals.install_worker_patches({"bootstrap_servers": "127.0.0.1:1"})
        patched = GroupCoordinator._maybe_leave_group
        assert patched.leaves_generation_zero
        internals.install_worker_patches({"bootstrap_servers": "127.0.0.1:1"})
        assert GroupCoordinator._maybe_leave_group is patched  # not wrapped twice
        assert faust_aiokafka.AIOKafkaConsumerThread._highwaters is not highwaters
    finally:
        GroupCoordinator._maybe_leave_group = original
        faust_aiokafka.AIOKafkaConsumerThread._highwaters = highwaters
