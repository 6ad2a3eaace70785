"""What a worker does with input partitions it can commit no more (exactly once).

A partition's transaction fails for good when its producer was fenced: the group gave the
partition to another worker, which started its own producer for it (a worker that stalled past
its session timeout finds this when it resumes), or the broker aborted a transaction this
worker kept open too long. Nothing of the transaction was committed, and whatever this worker
did with the partition since its last commit must not count:
- the tables' values of the partition's sessions are dropped (they hold writes whose
  changelog was never committed), and the changelog partitions are marked to be restored from
  their start should the partition come back;
- the lane stops fetching and processing the partition, and its records in hand are let go,
  never acknowledged (stream.worker.commit);
- the worker rejoins its group, so its assignment is one the fence agrees with; no producer
  is started for the partition before that (stream.kafka.transactional).
It goes on with its other partitions meanwhile, and never exits for this.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from faust.types import TP

from stream.kafka import internals
from stream.worker.lane import LaneApp
from stream.worker.tables import TableStore

log = logging.getLogger(__name__)


async def give_up(app: LaneApp, store: TableStore, changelogs: Iterable[str],
                  partitions: set[int]) -> None:
    sessions = store.drop_partitions(partitions)
    internals.forget_recovered(app, [TP(topic, p) for topic in changelogs for p in partitions])
    log.warning("gave up input partitions %s: this worker can commit nothing more of them "
                "(another worker owns them now, or a transaction was open too long); dropped "
                "the state of %d sessions, rejoining the group", sorted(partitions), sessions)
    await app.lane_consumer.lose(partitions)
