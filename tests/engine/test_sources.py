"""What a session's state keeps of where a record was read: its origin's digest, cached by the
source, the same as every earlier version stored (a restart after an upgrade reads it back)."""

from __future__ import annotations

from stream.engine import Action, Engine, FileSource, KafkaSource
from stream.engine.text import digest64
from tests.support.builders import assistant, encode, header, mirror, new_session, user


def test_an_origin_digest_is_the_digest_of_the_origin_earlier_versions_stored():
    # 0.1 and 0.2 kept digest64 of these very strings in the session's state
    kafka = KafkaSource("session-events", 2, 7)
    assert kafka.origin_digest() == digest64(b"kafka:session-events/2")
    assert FileSource("a/s1.jsonl", 3).origin_digest() == digest64(b"file:a/s1.jsonl")
    path = b"caf\xe9.jsonl".decode("utf-8", "surrogateescape")
    assert FileSource(path, 1).origin_digest() == digest64(b"file:caf\xed\xb3\xa9.jsonl")


def test_partitions_and_topics_have_origins_of_their_own():
    digests = {KafkaSource(topic, partition, 0).origin_digest()
               for topic in ("in", "in-2") for partition in range(3)}
    assert len(digests) == 6


def test_a_replayed_record_is_known_after_the_cache_of_origins_was_emptied():
    text = "Moved it to Thursday."
    lines = encode([header(), user(), assistant(text), mirror(text)])
    engine, session = Engine(), new_session()
    first = [engine.process(session, raw, KafkaSource("in", 0, n)) for n, raw in enumerate(lines)]
    for n in range(5000):  # more origins than the cache keeps
        KafkaSource(f"other-{n}", 0, 0).origin_digest()
    again = [engine.process(session, raw, KafkaSource("in", 0, n)) for n, raw in enumerate(lines)]
    assert [v.action for v in first] == [Action.KEPT] * 3 + [Action.DROPPED]
    assert [(v.action, v.output, v.drop_rule) for v in again] == [
        (v.action, v.output, v.drop_rule) for v in first
    ]
    assert [a.id for v in again for a in v.alerts] == [a.id for v in first for a in v.alerts]
