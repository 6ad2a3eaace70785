"""The policy for a broker that goes away (stream.kafka.retry), without a broker: what is
retried, what is not, what the source loop commits meanwhile, and how quiet the logs stay."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NodeNotReadyError,
    TopicAuthorizationFailedError,
)

from stream.kafka.producer import send_records
from stream.kafka.retry import Backoff, Stopped, _OncePerWindow, curable, until_done
from stream.sources.base import Batch, Record
from stream.sources.publish import pump
from tests.support.sources import ScriptedSource, records

FAST = Backoff(first=0.001, most=0.002)


def test_what_waiting_for_the_broker_cures() -> None:
    assert curable(KafkaConnectionError("gone"))
    assert curable(NodeNotReadyError())
    assert curable(KafkaTimeoutError())  # aiokafka's own timeouts, not marked retriable
    assert not curable(TopicAuthorizationFailedError())
    assert not curable(MessageSizeTooLargeError())
    assert not curable(ConnectionError("not a Kafka error"))


async def test_until_done_retries_until_the_broker_takes_it(caplog) -> None:
    failures = [KafkaConnectionError("gone"), NodeNotReadyError()]

    async def attempt() -> str:
        if failures:
            raise failures.pop(0)
        return "acked"

    with caplog.at_level(logging.WARNING, "stream.kafka.retry"):
        assert await until_done(attempt, "sending 3 records", broker="b:9092",
                                backoff=Backoff(first=0.001)) == "acked"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert lines[0].startswith("sending 3 records failed: the broker at b:9092 did not take it")
    assert lines[-1] == "sending 3 records succeeded after 2 failed attempts"


async def test_until_done_gives_up_at_once_on_what_no_retry_cures() -> None:
    calls = 0

    async def attempt() -> None:
        nonlocal calls
        calls += 1
        raise TopicAuthorizationFailedError()

    with pytest.raises(TopicAuthorizationFailedError):
        await until_done(attempt, "sending", broker="b", backoff=FAST)
    assert calls == 1


async def test_until_done_stops_when_told_to() -> None:
    stop = asyncio.Event()

    async def attempt() -> None:
        stop.set()
        raise KafkaConnectionError("gone")

    with pytest.raises(Stopped):
        await until_done(attempt, "sending", broker="b", stop=stop, backoff=Backoff(first=5))


async def test_the_source_sends_a_batch_again_until_acked_and_commits_it_once() -> None:
    source = ScriptedSource([Batch(records(b"1", b"2"), 1, more=True), Batch(records(b"3"), 2)])
    attempts: list[list[Record]] = []

    async def send(batch: list[Record]) -> None:
        attempts.append(list(batch))
        if len(attempts) <= 2:
            raise KafkaConnectionError("broker gone")

    assert await pump(source, send, poll_interval=60, once=True, backoff=FAST) == 3
    # the same records, byte for byte, until they were acknowledged; then the next batch
    assert attempts == [records(b"1", b"2")] * 3 + [records(b"3")]
    assert source.committed == [1, 2]


async def test_a_source_stopped_while_the_broker_is_away_commits_nothing() -> None:
    source = ScriptedSource([Batch(records(b"1"), 1)])
    stop = asyncio.Event()

    async def send(batch: list[Record]) -> None:
        stop.set()  # SIGTERM while waiting for the broker
        raise KafkaConnectionError("broker gone")

    assert await pump(source, send, poll_interval=60, once=False, stop=stop,
                      backoff=Backoff(first=5)) == 0
    assert source.committed == []


class _Producer:
    """Futures the test settles: the first fails at once, the others later."""

    def __init__(self) -> None:
        self.futures: list[asyncio.Future] = []

    async def send(self, topic, value=None, key=None, headers=None) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        if not self.futures:
            future.set_exception(NodeNotReadyError())
        self.futures.append(future)
        return future


async def test_a_failed_send_is_reported_once_every_earlier_send_settled() -> None:
    producer = _Producer()
    task = asyncio.ensure_future(send_records(producer, "t", records(b"1", b"2", b"3")))
    await asyncio.sleep(0.01)
    assert not task.done()  # the first failed, but the others are still in the producer
    for future in producer.futures[1:]:
        future.set_result(None)
    with pytest.raises(NodeNotReadyError):
        await task


def test_a_broker_away_logs_each_client_message_once_per_window() -> None:
    once = _OncePerWindow(window=3600)

    def record(msg: str, level: int = logging.ERROR) -> logging.LogRecord:
        return logging.LogRecord("aiokafka", level, __file__, 1, msg, (1,), None)

    passed = [once.filter(record("Unable connect to node with id %s")) for _ in range(50)]
    assert passed == [True] + [False] * 49
    assert once.filter(record("Unable to update metadata from [%s]"))  # another message
    assert once.filter(record("Connected to %s", logging.INFO))  # info is never held back
    once.last.clear()
    again = record("Unable connect to node with id %s")
    assert once.filter(again)
    assert again.getMessage() == (
        "Unable connect to node with id 1 (49 more like this since the last one, not logged)")
