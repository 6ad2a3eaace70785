"""The consumer loop every sink runs under: what a sink made durable is committed, nothing else."""

from __future__ import annotations

import pytest

from stream.brokers import RunningBroker
from stream.consumers.consume import consume
from stream.kafka.admin import create_topics
from stream.settings import Settings
from tests.support.sinks import KeepingSink
from tests.support.topics import publish

RECORDS = [(f"session-{n % 3}".encode(), f"entry {n}".encode()) for n in range(12)]


@pytest.mark.integration
async def test_a_failed_write_commits_nothing_and_the_next_run_writes_everything(
    broker: RunningBroker,
) -> None:
    # The shortest session timeout Kafka allows: a member that stops in its group's first
    # generation does not leave the group on Tansu, and the next one waits for it to time out.
    settings = Settings.load(None, {"SESSION_STREAM_BROKER": broker.url}).replace(
        session_timeout=6.0)
    create_topics(broker.bootstrap, {"consume-loop": 2})
    await publish(settings, "consume-loop", RECORDS)

    failing = KeepingSink(failures=1)
    with pytest.raises(OSError, match="disk is full"):
        await consume(settings, "consume-loop", failing, "consume-loop-group", follow=False)
    assert failing.written == []

    sink = KeepingSink()
    stats = await consume(settings, "consume-loop", sink, "consume-loop-group", follow=False)
    assert (stats.records, stats.written) == (len(RECORDS), len(RECORDS))
    assert sorted(sink.written) == sorted(RECORDS)
    for key in {key for key, _ in RECORDS}:  # a key's records in the order they were sent
        assert [v for k, v in sink.written if k == key] == [v for k, v in RECORDS if k == key]

    again = KeepingSink()
    stats = await consume(settings, "consume-loop", again, "consume-loop-group", follow=False)
    assert stats.records == 0 and again.written == []
