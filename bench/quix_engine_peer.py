"""The peer that does the worker's work: Quix Streams running this project's engine.

What a user would write instead of `session-stream worker`: the same Settings (read from the
same environment), the same Engine with the same limits, each session's state in Quix's
RocksDB store (backed by its changelog topic) in the worker's own encoding (`StoredSession`,
and the engine's remembered values packed as the worker's memory table packs them), and the
clean, alerts and dead-letter records the worker writes, with the same headers.

It runs in bench/.venv-quix with this project on PYTHONPATH (bench.e2e): the interpreter is the
worker's, so the compiled engine modules in the tree load as they do for the worker; the
harness records which build ran. Where it differs from the worker, as Quix would have it:
idle sessions expire by Quix's event-time TTL on every write (the worker sweeps them),
outputs go to the partition of their key (the worker keeps the input's), and Quix commits
every 5 s by default.

`python bench/quix_engine_peer.py` with the worker's SESSION_STREAM_* environment.
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import timedelta

from quixstreams import Application, State
from quixstreams.context import message_context
from quixstreams.models.serializers import Serializer

from stream.engine import Engine, KafkaOrigin, Memory, Session, SessionState, Verdict
from stream.engine.engine import dead_letter_verdict
from stream.settings import Settings
from stream.worker import codec

# the worker's own reading of a record's key and headers (private to its processor, which a
# peer cannot reach through a public name without changing the compiled worker)
from stream.worker.processor import _session_headers, _session_id, dead_letter_record
from stream.worker.tables import StoredSession

# One output record: the topic it goes to, its value, its headers.
Output = tuple[str, bytes, list[tuple[str, bytes]] | None]
SESSION = "session"
MEMORY = "m:"  # a remembered value's state key: after the session's own, as in the worker's


class StateMemory(Memory):
    """The engine's Memory on the record's Quix state (already prefixed by the session id)."""

    __slots__ = ("_state", "_ttl")

    def __init__(self, state: State, ttl: timedelta) -> None:
        self._state = state
        self._ttl = ttl

    def get(self, key: str) -> list | None:
        data = self._state.get_bytes(MEMORY + key)
        return codec.unpack(data) if data is not None else None

    def put(self, key: str, value: list) -> None:
        self._state.set_bytes(MEMORY + key, codec.pack(value), ttl=self._ttl)


class Payload(Serializer):
    """An Output's value: the topic and headers were used to route it (below)."""

    def __call__(self, value: Output, ctx: object) -> bytes:
        return value[1]


def main() -> int:
    settings = Settings.load()
    logging.basicConfig(level=logging.WARNING)
    engine = Engine(settings.limits())
    ttl = timedelta(seconds=settings.session_ttl)
    app = Application(
        broker_address=settings.bootstrap,
        consumer_group=settings.app_id,
        auto_offset_reset="earliest",
        state_dir=settings.data_dir,
        loglevel="WARNING",
        consumer_extra_config={"session.timeout.ms": int(settings.session_timeout * 1000),
                               "heartbeat.interval.ms": 1_000},
    )
    source = app.topic(settings.input_topic, key_deserializer="bytes", value_deserializer="bytes")
    topics = {name: app.topic(name, key_serializer="bytes", value_serializer=Payload())
              for name in settings.output_topics}

    def clean(value: bytes | None, key: bytes | None, timestamp: int, headers: object,
              state: State) -> list[Output]:
        context = message_context()
        where = KafkaOrigin(context.topic, context.partition, context.offset)
        session_id, problem = _session_id(key)
        if problem is not None or value is None:
            verdict = dead_letter_verdict(session_id, value or b"", where,
                                          problem or "record has no value")
            return outputs(settings, where, key, verdict, headers)
        stored = state.get_bytes(SESSION)
        session = Session(session_id,
                          StoredSession.from_bytes(stored).state if stored else SessionState(),
                          StateMemory(state, ttl))
        verdict = engine.process(session, value, where)
        state.set_bytes(SESSION, StoredSession(session.state, time.time(),
                                               context.partition).to_bytes(), ttl=ttl)
        return outputs(settings, where, key, verdict, headers)

    sdf = app.dataframe(source)
    sdf = sdf.apply(clean, stateful=True, metadata=True, expand=True)
    sdf = sdf.set_headers(lambda value, key, timestamp, headers: value[2] or [])
    sdf = sdf.set_timestamp(lambda value, key, timestamp, headers: int(time.time() * 1000))
    sdf.to_topic(lambda value, key, timestamp, headers: topics[value[0]])
    app.run()
    return 0


def outputs(settings: Settings, source: KafkaOrigin, key: bytes | None, verdict: Verdict,
            headers: object) -> list[Output]:
    """The worker's records for a verdict (BatchProcessor._outputs), as Outputs."""
    found: list[Output] = []
    if verdict.output is not None:
        found.append((settings.clean_topic, verdict.output, _session_headers(headers)))
    for alert in verdict.alerts:
        found.append((settings.alerts_topic, alert.to_bytes(), None))
    if verdict.dead_letter is not None:
        letter = dead_letter_record(settings.dlq_topic, source.partition, key,
                                    verdict.dead_letter, source)
        found.append((letter.topic, letter.value, letter.headers))
    return found


if __name__ == "__main__":
    sys.exit(main())
