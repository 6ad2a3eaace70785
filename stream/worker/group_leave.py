"""A stopping worker leaves its consumer group on every broker, Tansu included.

aiokafka sends LeaveGroup only from a generation above 0, as Apache Kafka numbers them from
1; Tansu numbers them from 0, so a worker that stopped in its group's first generation
stayed a member until its session timed out, and a restarted worker waited that long (plus
a failed sync) before it could process again. Generation 0 is a real one only on such
brokers, so leaving from it is right everywhere.
"""

from __future__ import annotations

import logging

from aiokafka.consumer.group_coordinator import GroupCoordinator
from aiokafka.errors import KafkaError
from aiokafka.protocol.group import LeaveGroupRequest

log = logging.getLogger(__name__)


def install() -> None:
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
    GroupCoordinator._maybe_leave_group = _maybe_leave_group
