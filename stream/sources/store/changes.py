"""Waking on the store's change: when a source looks at the change counter of OpenClaw's store
next.

A reader polling every second leaves a row that no event announces (follow-sqlite's every row;
the custom rows OpenClaw writes after a reply, for the gateway source) waiting half a second on
average. So the sources ask the reader's `changed()` every CHANGE_INTERVAL: one
`PRAGMA data_version` on the open connection, which moves when another connection committed, in
WAL mode read from the shared-memory index without touching the database file (measured idle
cost: docs/performance.md), and BUSY_SPEEDUP times as often for BUSY_SECONDS after the store
was last seen written to (`ChangeLooks`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from contextlib import suppress

# Seconds between two looks at the store's change counter: what a row without an event waits at
# most beyond its commit. An idle source pays for the looks in wake-ups more than in the PRAGMA;
# what each interval costs: docs/performance.md, "No row waits for a poll".
CHANGE_INTERVAL = 0.05
# A store written to within BUSY_SECONDS (its counter moved, or a gateway event named it) is
# looked at BUSY_SPEEDUP times as often, 10 ms by default: the rows that come with no event of
# their own, such as the custom rows OpenClaw writes right after a reply, then wait no longer
# for their look than a round of the source waits anyway (publish.ROUND_INTERVAL). The looks
# cost little beside the reads they bring, and a store left alone is back to CHANGE_INTERVAL
# within BUSY_SECONDS.
BUSY_SPEEDUP = 5
BUSY_SECONDS = 1.0


class ChangeLooks:
    """When a source looks at its store's change counter next: every `interval` while the store
    is left alone, BUSY_SPEEDUP times as often within BUSY_SECONDS of `written()`."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self._busy_until = -math.inf
        self._written = asyncio.Event()

    def written(self) -> None:
        """The store's counter moved, or an event told of a commit: an idle wait under way ends
        now, so that the rows after the event do not wait out the idle interval."""
        self._busy_until = self.clock() + BUSY_SECONDS
        self._written.set()

    def next_wait(self) -> float:
        if self.clock() < self._busy_until:
            return self.interval / BUSY_SPEEDUP
        return self.interval

    async def wait(self) -> None:
        """Until the next look is due."""
        delay = self.next_wait()
        if delay < self.interval:
            await asyncio.sleep(delay)
            return
        self._written.clear()
        with suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._written.wait()
