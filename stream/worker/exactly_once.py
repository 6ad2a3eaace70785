"""Exactly-once delivery: a batch as one transaction per input partition.

Every output goes to the partition its input came from, and the tables are co-partitioned with
the input, so each record a batch leaves behind belongs to one input partition: its outputs,
the changelog records of its sessions' state (the TTL sweep's tombstones too) and the offset
after its last input record go in that partition's transaction, through the partition's own
producer (stream.kafka.transactional: why one per partition). The transactions of a batch run
side by side; the Committer (stream.worker.commit) keeps the batches in order.

A partition whose producer can commit no more (fenced: another worker was given the partition
and started its producer; or the broker aborted a transaction this worker kept open too long)
is lost: nothing of it is committed, its records are let go and the worker gives it up
(stream.worker.fencing). No producer is started for it before the group assigns it again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiokafka import TopicPartition
from faust.types import Message

from stream.kafka.transactional import (
    PartitionProducers,
    TransactionLost,
    commit_transaction,
    make_transactional_producer,
    transactional_id,
)
from stream.settings import Settings
from stream.worker.commit import keep_unsaved, notice_instead
from stream.worker.processor import OutRecord, ProcessedBatch
from stream.worker.tables import ChangelogRecord

log = logging.getLogger(__name__)


@dataclass
class _Part:
    """What one input partition's transaction holds."""

    records: list[OutRecord | ChangelogRecord] = field(default_factory=list)
    offsets: dict[TopicPartition, int] = field(default_factory=dict)


class ExactlyOnce:
    offsets_in_transactions = True

    def __init__(self, settings: Settings, producers: PartitionProducers | None = None) -> None:
        self._producers = producers or PartitionProducers(
            lambda partition: make_transactional_producer(
                settings, transactional_id(settings, partition)),
            settings.bootstrap)
        self._group = settings.app_id
        self._input_topic = settings.input_topic
        self._notice = notice_instead(settings.dlq_topic)

    async def start(self) -> None:
        pass  # producers are started per assignment

    async def stop(self) -> None:
        await self._producers.close()

    async def assigned(self, partitions: set[int]) -> None:
        await self._producers.assign(partitions)

    async def revoked(self) -> None:
        await self._producers.close()

    async def deliver(self, batch: ProcessedBatch, messages: Sequence[Message]) -> set[int]:
        parts = self._parts(batch, messages)
        results = await asyncio.gather(*(self._commit(partition, part)
                                         for partition, part in parts.items()))
        lost = {partition for partition, committed in zip(parts, results, strict=True)
                if not committed}
        for partition in lost:
            await self._producers.lose(partition)
        return lost

    def _parts(self, batch: ProcessedBatch, messages: Sequence[Message]) -> dict[int, _Part]:
        parts: dict[int, _Part] = {}
        for record in (*batch.outputs, *batch.changelog):
            parts.setdefault(record.partition, _Part()).records.append(record)
        for message in messages:
            offsets = parts.setdefault(message.partition, _Part()).offsets
            tp = TopicPartition(self._input_topic, message.partition)
            offsets[tp] = max(offsets.get(tp, 0), message.offset + 1)
        return parts

    async def _commit(self, partition: int, part: _Part) -> bool:
        producer = self._producers.get(partition)
        if producer is None:
            return False
        try:
            await commit_transaction(producer, part.records, part.offsets, self._group,
                                     self._instead)
        except TransactionLost as error:
            log.warning("input partition %d: its transaction can commit no more (%s); nothing "
                        "of it is committed", partition, error)
            return False
        except Exception:  # a transaction in a state none foresaw
            # Giving the partition up commits nothing and rejoins the group: always safe,
            # where the error escaping would stop the worker's fetcher.
            log.exception("input partition %d: its transaction failed unexpectedly; nothing of "
                          "it is committed", partition)
            return False
        return True

    def _instead(self, record: OutRecord | ChangelogRecord,
                 error: Exception) -> OutRecord | ChangelogRecord | None:
        if isinstance(record, OutRecord):
            return self._notice(record, error)
        return keep_unsaved(record, error)
