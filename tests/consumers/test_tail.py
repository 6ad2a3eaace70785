"""`tail` prints topics readably, one line per record, never their text."""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from aiokafka import ConsumerRecord

from stream.brokers import RunningBroker, free_port
from stream.commands import tail as tail_command
from stream.consumers import tail
from stream.kafka.admin import create_topics
from tests.support.topics import PARTITIONS, parse, publish, settings_for

SECRET = "the secret transcript text"


def record(
    value: bytes, key: bytes | None = b"s-1", headers: tuple[tuple[str, bytes], ...] = ()
) -> ConsumerRecord:
    return ConsumerRecord(
        topic="t",
        partition=0,
        offset=0,
        timestamp=0,
        timestamp_type=0,
        key=key,
        value=value,
        checksum=None,
        serialized_key_size=len(key or b""),
        serialized_value_size=len(value),
        headers=headers,
    )


def alert_json(kind: str, entry_id: str | None, message: str) -> bytes:
    return orjson.dumps(
        {
            "id": f"alert-{kind}",
            "kind": kind,
            "severity": "warning",
            "session_id": "s-1",
            "entry_id": entry_id,
            "related_entry_id": None,
            "action": "drop",
            "message": message,
            "evidence": {"text": SECRET},
            "source": {"topic": "session-events", "partition": 0, "offset": 7},
        }
    )




# --- format_record ---------------------------------------------------------------------------


def test_a_records_time_is_its_kafka_timestamp_in_utc() -> None:
    stamped = record(alert_json("gap", None, "m"))
    stamped.timestamp = 1796469603123
    assert tail.record_time(stamped) == "2026-12-05T11:20:03Z"


def test_alert_is_one_line_with_severity_kind_session_entry_and_message() -> None:
    line = tail.format_record("alerts", record(alert_json("echo", "e-9", "mirror of\nparent")))
    assert line == r"warning echo session=s-1 entry=e-9 mirror of\nparent"
    assert SECRET not in line


def test_alert_without_entry_shows_a_dash() -> None:
    line = tail.format_record("alerts", record(alert_json("gap", None, "m")))
    assert line == "warning gap session=s-1 entry=- m"


@pytest.mark.parametrize("role", ["clean", "input"])
def test_entry_shows_type_id_and_role_but_never_its_text(role: str) -> None:
    entry = {"type": "message", "id": "e-1", "message": {"role": "user", "content": SECRET}}
    line = tail.format_record(role, record(orjson.dumps(entry)))
    assert line == "session=s-1 message id=e-1 role=user"


def test_entry_without_message_and_structured_fields_shows_dashes() -> None:
    entry = {"type": "custom", "id": {"nested": SECRET}, "data": SECRET}
    line = tail.format_record("clean", record(orjson.dumps(entry)))
    assert line == "session=s-1 custom id=- role=-"


def test_malformed_input_line_shows_only_its_size() -> None:
    line = tail.format_record("input", record(b'{"type": "message", ' + SECRET.encode()))
    assert line == "session=s-1 unparsable-entry bytes=46"


def test_dead_letter_shows_reason_and_raw_size_without_the_raw_line() -> None:
    letter = {"session_id": "s-1", "reason": "invalid JSON", "raw": SECRET, "raw_encoding": "utf-8"}
    line = tail.format_record("dlq", record(orjson.dumps(letter)))
    assert line == f"session=s-1 reason=invalid JSON bytes={len(SECRET)}"


def test_dead_letter_prefers_the_reason_header_and_decodes_base64_size() -> None:
    letter = {"reason": "body reason", "raw": "AAEC/w==", "raw_encoding": "base64"}
    headers = (("source", b"t/0/1"), ("reason", b"line is not UTF-8"))
    line = tail.format_record("dlq", record(orjson.dumps(letter), key=None, headers=headers))
    assert line == "session=- reason=line is not UTF-8 bytes=4"


def test_control_characters_from_the_topic_are_escaped() -> None:
    line = tail.format_record("clean", record(b'{"type":"x\\u001b[2J","id":"1"}', key=b"k\n"))
    assert line == r"session=k\n x\x1b[2J id=1 role=-"


# --- produce and tail without a broker -------------------------------------------------------




def test_tail_reports_an_unreachable_broker() -> None:
    args = parse(tail_command, ["--broker", f"kafka://127.0.0.1:{free_port()}"])
    stderr = io.StringIO()
    assert tail_command.main(args, stdout=io.StringIO(), stderr=stderr) == 1
    assert "cannot read session-alerts from the Kafka broker" in stderr.getvalue()


# --- against a broker ------------------------------------------------------------------------
















@pytest.mark.integration
def test_tail_main_prints_alerts_and_stops_at_the_end(broker: RunningBroker) -> None:
    settings = settings_for(broker, alerts_topic="tail-alerts")
    create_topics(broker.bootstrap, {settings.alerts_topic: PARTITIONS})
    alerts = [alert_json("echo", "e-1", "first"), alert_json("gap", "e-2", "second")]
    asyncio.run(publish(settings, settings.alerts_topic, [(b"s-1", a) for a in alerts]))
    args = parse(tail_command, ["--broker", broker.url, "--alerts-topic", settings.alerts_topic])
    stdout = io.StringIO()

    before = datetime.now(UTC).replace(microsecond=0)
    assert tail_command.main(args, stdout=stdout) == 0

    lines = [line.split(" ", 1) for line in stdout.getvalue().splitlines()]
    assert [body for _, body in lines] == [
        "warning echo session=s-1 entry=e-1 first",
        "warning gap session=s-1 entry=e-2 second",
    ]
    # each after the time the broker's record carries: when it was published
    for stamp, _ in lines:
        assert before - timedelta(minutes=1) <= datetime.fromisoformat(stamp) <= datetime.now(UTC)


@pytest.mark.integration
def test_tail_main_stops_after_max_records(broker: RunningBroker) -> None:
    settings = settings_for(broker, clean_topic="tail-max")
    create_topics(broker.bootstrap, {settings.clean_topic: 1})
    entries = [orjson.dumps({"type": "message", "id": f"e-{n}"}) for n in range(5)]
    asyncio.run(publish(settings, settings.clean_topic, [(b"s-2", e) for e in entries]))
    args = parse(
        tail_command,
        [
            "--broker",
            broker.url,
            "--topic",
            "clean",
            "--clean-topic",
            settings.clean_topic,
            "--max",
            "2",
        ],
    )
    stdout = io.StringIO()

    assert tail_command.main(args, stdout=stdout) == 0

    assert [line.split(" ", 1)[1] for line in stdout.getvalue().splitlines()] == [
        "session=s-2 message id=e-0 role=-",
        "session=s-2 message id=e-1 role=-",
    ]


@pytest.mark.integration
def test_tail_main_reports_a_missing_topic(broker: RunningBroker) -> None:
    args = parse(tail_command,
                 ["--broker", broker.url, "--dlq-topic", "never-created", "--topic", "dlq"])
    stderr = io.StringIO()

    assert tail_command.main(args, stdout=io.StringIO(), stderr=stderr) == 1

    assert "topic 'never-created' does not exist" in stderr.getvalue()


@pytest.mark.integration
async def test_read_topic_from_the_end_skips_what_is_there_and_follows_what_comes(
    broker: RunningBroker,
) -> None:
    topic = "tail-from-end"
    settings = settings_for(broker)
    create_topics(broker.bootstrap, {topic: PARTITIONS})
    # One batch of many records: where Tansu's ListOffsets(latest) falls short of the end.
    await publish(settings, topic, [(f"s-{n % 3}".encode(), b"old") for n in range(300)])
    followed: list[bytes] = []

    async def follow() -> None:
        async for consumed in tail.read_topic(settings, topic, follow=True, from_beginning=False):
            followed.append(consumed.value)
            if len(followed) == 2:
                return

    following = asyncio.create_task(follow())
    await asyncio.sleep(2.0)  # let it find the end before new records come
    await publish(settings, topic, [(b"s-1", b"new-1"), (b"s-1", b"new-2")])
    await asyncio.wait_for(following, timeout=15)

    assert followed == [b"new-1", b"new-2"]
    assert [r async for r in tail.read_topic(settings, topic, False, from_beginning=False)] == []
