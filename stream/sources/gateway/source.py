"""The gateway source: an event on the bus says which session changed, the store says what.

`session.message` carries a display projection (text cut at 8,000 characters, thinking
signatures removed, no parentId, silent rows left out), not the transcript entry, so it is used
only as a trigger: on each one the source reads that session's rows past its checkpoint from
the agent's store, with the reader `follow-sqlite` uses, and publishes them byte for byte.
`sessions.changed` with a session id reads that session too (rows without a message of their
own, such as the custom entries after a reply, come with it); one without, or one for a reset,
deletion, compaction or rewind, has the whole store looked at. The whole store is also looked
at every poll interval (one PRAGMA when nothing changed), and a commit to a store wakes the
source within CHANGE_INTERVAL (the store's change counter; a fifth of it while events or commits
say the store is being written to) to read the sessions appended to, so rows that came with no
event arrive all the same and about as soon, while the socket is down too, and after every
(re)connect, because events sent while the source was away are not replayed: a gateway restart
or a dropped socket loses nothing and, the checkpoint moving only after the broker's
acknowledgement, sends nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stream.sources.base import Batch, Record
from stream.sources.gateway.client import INITIAL_BACKOFF, MAX_BACKOFF, GatewayClient
from stream.sources.gateway.protocol import Auth, SessionEvent
from stream.sources.gateway.stores import Stores
from stream.sources.positions import PositionsError, PositionsWriter, load_positions
from stream.sources.store.changes import CHANGE_INTERVAL, ChangeLooks
from stream.sources.store.reader import (
    TABLE,
    Decompress,
    TranscriptStore,
    agent_of_session_key,
    has_events_table,
)
from stream.sources.store.rewrites import Progress, progress_from_json, progress_to_json

log = logging.getLogger(__name__)

KIND = "gateway"
# sessions.changed reasons after which sessions may have appeared, gone or been rewritten (as
# OpenClaw 2026.9.6's gateway names them): the whole store is looked at, not only the session.
LIFECYCLE_REASONS = frozenset({
    "create", "new", "reset", "delete", "deleted", "archive", "move", "fork", "rewind",
    "compact", "compaction", "recovery",
})

Positions = dict[str, Progress]  # per agent


@dataclass(frozen=True)
class Gateway:
    url: str
    credentials: Callable[[], Auth]
    startup_deadline: float
    backoff: tuple[float, float] = (INITIAL_BACKOFF, MAX_BACKOFF)


class GatewaySource:
    def __init__(
        self,
        gateway: Gateway,
        stores: Stores,
        checkpoint: Path,
        *,
        poll_interval: float,
        page_size: int,
        decompress: Decompress | None,
        change_interval: float = CHANGE_INTERVAL,
    ) -> None:
        self.gateway = gateway
        self.locations = stores
        self.checkpoint = checkpoint
        self.origin = str(stores.origin)
        self.poll_interval = poll_interval
        self.looks = ChangeLooks(change_interval)
        self.page_size = page_size
        self.decompress = decompress
        self._saved = _load(checkpoint, self.origin)
        self._writer = PositionsWriter(checkpoint, KIND, self.origin)
        self.stores: dict[str, TranscriptStore] = {}
        self._dirty: dict[str, set[str]] = defaultdict(set)
        self._sweeps: set[str] = set()  # agents whose whole store is to be read
        self._appended: set[str] = set()  # agents whose store changed: read what was appended
        self._last_sweep: float | None = None  # None: a full sweep is due
        self._waiting_logged = False
        self._unready_logged: set[str] = set()
        self.client: GatewayClient | None = None

    def poll(self) -> Batch[Positions]:
        now = time.monotonic()
        if self._last_sweep is None or now - self._last_sweep >= self.poll_interval:
            self._discover()
            self._sweeps.update(self.stores)
            self._last_sweep = now
        sweeps, self._sweeps = self._sweeps, set()
        dirty, self._dirty = self._dirty, defaultdict(set)
        appended, self._appended = self._appended, set()
        records: list[Record] = []
        positions: Positions = {}
        more = False
        for agent, store in self.stores.items():
            if agent in sweeps:
                read = store.read()
            elif agent in appended or dirty.get(agent):
                read = store.read_appended(dirty.get(agent, ()))
            else:
                positions[agent] = store.progress
                continue
            records += read.records
            positions[agent] = read.progress
            if read.more:
                more = True
                if agent in sweeps:
                    self._sweeps.add(agent)
                else:
                    self._appended.add(agent)
                    self._dirty[agent] |= dirty.get(agent, set())
        return Batch(records, positions, more)

    def commit(self, batch: Batch[Positions]) -> None:
        changed = any(
            progress.marks != self.stores[agent].progress.marks
            for agent, progress in batch.position.items()
        )
        if changed:
            # Agents not opened (yet) keep what the checkpoint had for them.
            saved = {**self._saved, **batch.position}
            content = {agent: progress_to_json(p) for agent, p in saved.items()}
            self._writer.save({"stores": content})
        for agent, progress in batch.position.items():
            self.stores[agent].advance(progress)

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
        self._writer.close()

    def _discover(self) -> None:
        """Opens the stores that appeared since the last look (all of them, the first time)."""
        for agent, path in self.locations.found().items():
            if agent not in self.stores:
                if not has_events_table(path):
                    if agent not in self._unready_logged:
                        log.info("agent %s's store %s has no %s table yet; looking again",
                                 agent, path, TABLE)
                        self._unready_logged.add(agent)
                    continue
                log.info("following agent %s: %s", agent, path)
                self.stores[agent] = TranscriptStore(
                    path, self._saved.get(agent, Progress({})), self.page_size,
                    self.decompress, agent_id=agent,
                )
        if not self.stores and not self._waiting_logged:
            log.warning("no agent store at %s yet; looking again every %g s",
                        self.locations.describe(), self.poll_interval)
            self._waiting_logged = True

    async def watch(self, news: asyncio.Event, stop: asyncio.Event) -> None:
        def on_event(event: SessionEvent) -> None:
            agent = event.agent_id or agent_of_session_key(event.session_key)
            if agent is None or not self.locations.follows(agent):
                return
            if agent not in self.stores:
                self._last_sweep = None  # its store is new, or about to be: look for it now
                news.set()
                return
            # Rows with no event of their own often follow (a reply's custom rows).
            self.looks.written()
            if event.session_id is not None:
                self._dirty[agent].add(event.session_id)
            if event.name == "sessions.changed" and (
                event.session_id is None or event.reason in LIFECYCLE_REASONS
            ):
                self._sweeps.add(agent)
            news.set()

        def on_connected() -> None:
            self._last_sweep = None  # events sent while away are not replayed: read it all
            news.set()

        gateway = self.gateway
        client = self.client = GatewayClient(
            gateway.url,
            gateway.credentials,
            on_event=on_event,
            on_connected=on_connected,
            startup_deadline=gateway.startup_deadline,
            backoff=gateway.backoff,
        )
        tasks = [asyncio.create_task(client.run()), asyncio.create_task(self._watch_stores(news))]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # raises what stopped it
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _watch_stores(self, news: asyncio.Event) -> None:
        """Marks the stores another connection committed to; the socket can be down meanwhile."""
        while True:
            await self.looks.wait()
            for agent, store in list(self.stores.items()):
                if store.changed():
                    self.looks.written()
                    self._appended.add(agent)
                    news.set()


def _load(checkpoint: Path, origin: str) -> Positions:
    data = load_positions(checkpoint, KIND, origin)
    if data is None:
        return {}
    stores = data.get("stores")
    if not isinstance(stores, dict):
        raise PositionsError(f"checkpoint {checkpoint} has no valid stores object")
    return {agent: progress_from_json(content, checkpoint) for agent, content in stores.items()}
