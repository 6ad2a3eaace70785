"""Hostile input through a running worker: dead-lettered or passed on, never a stop, no leaks."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from tests.support.harness import WorkerProcess, consume_all, run, wait_until, worker_settings

pytestmark = pytest.mark.integration

MARKER = "SECRET-MARKER-7f3a"


def hostile_records() -> list[tuple[bytes | None, bytes | None, str]]:
    """(key, value, expected outcome: 'dlq' or 'clean')."""
    message = {"type": "message", "id": "m-big", "parentId": None,
               "message": {"role": "user", "content": MARKER + "x" * (5 * 1024 * 1024)}}
    return [
        (b"hostile", os.urandom(300) + MARKER.encode(), "dlq"),
        (b"hostile", b"", "dlq"),
        (b"hostile", None, "dlq"),
        (None, b'{"type":"session","id":"x"}', "dlq"),
        (b"\xff\xfe\xfd", b'{"type":"session","id":"x"}', "dlq"),
        (b"hostile", b'{"type":"session","version":3,"id":"someone-else"}', "clean"),
        (b"hostile", orjson.dumps(message), "clean"),
        (b"hostile", b"[" * 10_000 + b"]" * 10_000, "dlq"),
        (b"hostile", b'{"type":"custom","id":"n1","big":123456789012345678901234567890}', "clean"),
        (b"hostile", b'{"type":"custom","id":"n2","value":NaN}', "dlq"),
        (b"hostile", b'{"type":"custom","id":"d1","id":"d2","note":"duplicate keys"}', "clean"),
        (b"hostile", b'{"type":"message","id":"t1","message":{"role":"assistant","content":'
                     b'[{"type":"text","text":{"not":"a string"}},{"type":"text","text":7}]}}',
         "clean"),
        (b"hostile", b'{"type":"message","id":"u1","message":{"role":"user","content":"'
                     + MARKER.encode() + b'"}}', "clean"),
    ]


def test_hostile_records_are_each_accounted_for_and_the_worker_goes_on(broker, tmp_path: Path):
    settings = worker_settings(broker, "hostile", tmp_path)
    cases = hostile_records()
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        run(_produce_large(settings, [(k, v) for k, v, _ in cases]))
        wait_until(lambda: (worker.stats() or {}).get("entries_in") == len(cases), 120,
                   "every hostile record")
        stats = worker.stats()
        assert worker.process.poll() is None
    finally:
        worker.stop()
    clean = run(consume_all(settings, settings.clean_topic))
    dlq = run(consume_all(settings, settings.dlq_topic))
    assert stats["kept"] == len(clean) == sum(1 for *_, o in cases if o == "clean")
    assert stats["dead_lettered"] == len(dlq) == sum(1 for *_, o in cases if o == "dlq")
    for record in dlq:
        letter = orjson.loads(record.value)
        assert letter["reason"]
        assert dict(record.headers)["reason"].decode() == letter["reason"]
    by_offset = {r.offset: r for r in dlq}
    raw = orjson.loads(by_offset[0].value)
    assert raw["raw_encoding"] == "base64"
    assert MARKER not in worker.log_text()


async def _produce_large(settings, records):
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all",
                                max_request_size=16 * 1024 * 1024)
    await producer.start()
    try:
        for key, value in records:
            await (await producer.send(settings.input_topic, value, key=key, partition=0))
    finally:
        await producer.stop()
