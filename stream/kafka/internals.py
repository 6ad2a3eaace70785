"""Every place the project reaches into Faust's or aiokafka's private API, and why.

The worker keeps Faust for its consumer group, table recovery and offset commits, and takes
its input through a batch lane beside Faust's per-event path; that, and two broker quirks,
need a few of the libraries' internals. They are all here, each with the version it was read
from (`PINNED`), so an upgrade has one file to check: `tests/kafka/test_internals.py` fails, naming
the touch point, when one of them moves. Nothing here runs at import: the worker applies the
two patches at its start-up (`install_worker_patches`).

Touch points (besides the patches below):
- Faust `Consumer._read_offset` (per partition, the newest offset handed on): the lane applies
  Faust's rule that a record older than it, after a seek, is old news.
- Faust `Consumer._unacked_messages`: the lane's records count as in flight until acked, so a
  rebalance or a stop waits for them before partitions move.
- Faust `Consumer._add_gap`: offsets the lane never sees (transaction markers, compacted
  records) are gaps, or Faust's commit stops at the first hole.
- Faust `Consumer._committed_offset`: lag for a partition not processed yet, for the stall
  watchdog and /metrics (Faust keeps no public view).
- Faust `Consumer._new_consumer_thread`, `AIOKafkaConsumerThread._create_worker_consumer`,
  `App._new_transport` (overridden in `stream.worker.lane`): where a Consumer subclass and
  the fetch wait can be put in.
- aiokafka `AIOKafkaConsumer._fetch_max_wait_ms`: Faust passes a fixed 1.5 s.
- aiokafka `AIOKafkaConsumer._client`: the only way to refresh metadata for every topic.
- Faust memory store `Table.data.data`: the table's dict, read and written directly.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping, MutableSet, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

# aiokafka is imported where it is touched: the worker's table store reads its tables through
# this module, and loading the Kafka client (some 50 modules, 11 MB) for that would be waste.
if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.consumer.group_coordinator import GroupCoordinator

log = logging.getLogger(__name__)

# The versions every touch point was read from.
PINNED: Final = {"faust-streaming": "0.15.3", "aiokafka": "0.14.0"}

# aiokafka: what the consumer asks a broker to hold a fetch for.
FETCH_MAX_WAIT_ATTRIBUTE: Final = "_fetch_max_wait_ms"


# --- Faust's consumer, as the lane uses it ---------------------------------------------------


def read_offsets(consumer: Any) -> MutableMapping[Any, int | None]:
    return cast(MutableMapping[Any, "int | None"], consumer._read_offset)


def unacked_messages(consumer: Any) -> MutableSet[Any]:
    return cast(MutableSet[Any], consumer._unacked_messages)


async def add_gap(consumer: Any, tp: Any, first: int, last: int) -> None:
    """Offsets `first`..`last` (inclusive) will never be delivered: commits may pass them."""
    await consumer._add_gap(tp, first, last)


def committed_offset(consumer: Any, tp: Any) -> int | None:
    offset = consumer._committed_offset.get(tp)
    return offset if isinstance(offset, int) else None


def set_fetch_max_wait(consumer: AIOKafkaConsumer, milliseconds: int) -> None:
    """Before the consumer starts: its fetcher reads the value when it is created."""
    setattr(consumer, FETCH_MAX_WAIT_ATTRIBUTE, milliseconds)


def table_dict(table: Any) -> dict[bytes, bytes]:
    """The dict behind a memory:// Faust table: its mapping API costs a Python call per
    access and an exception per miss."""
    return cast(dict, table.data.data)


# --- aiokafka --------------------------------------------------------------------------------


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

    Tansu answers ListOffsets(latest) with "base offset of the newest batch + 1", not the log
    end, so Faust stopped recovering a table early and lost its newest updates. A fetch from
    that offset carries the true high watermark (`log_end_offsets`); on Apache Kafka both
    agree.
    """
    from aiokafka import TopicPartition
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    from stream.kafka.consumer import log_end_offsets

    options = dict(client_options)

    async def _highwaters(self: AIOKafkaConsumerThread, partitions: Sequence[Any]):
        ends = await log_end_offsets(options, partitions)
        return {tp: ends[TopicPartition(tp.topic, tp.partition)] for tp in partitions}

    AIOKafkaConsumerThread._highwaters = _highwaters  # type: ignore[method-assign]
