"""`session-stream verdicts` against the broker: it reads what the worker wrote, answers on
loopback with its token only, follows new records, and rebuilds the same answers after a
restart."""

from __future__ import annotations

import asyncio
import stat
import time
from pathlib import Path

import pytest

from stream.brokers import RunningBroker
from stream.commands.clean import clean_session
from stream.engine import Engine
from stream.kafka.admin import create_topics
from tests.support.builders import assistant, custom, encode, header, user
from tests.support.topics import publish, settings_for
from tests.support.verdicts import VerdictService

pytestmark = pytest.mark.integration

TEXT = "The deployment finished: 3 services updated."


def worker_outputs(session_id: str, items: list[dict]) -> tuple[list, list]:
    """The clean and alert records the worker writes for a session (the engine's verdicts)."""
    lines = list(enumerate(encode([header(session_id), *items]), 1))
    verdicts = list(clean_session(Engine(), session_id, f"{session_id}.jsonl", lines))
    key = session_id.encode()
    clean = [(key, v.output) for v in verdicts if v.output is not None]
    alerts = [(key, a.to_bytes()) for v in verdicts for a in v.alerts]
    return clean, alerts


def test_it_answers_what_the_worker_dropped_and_rebuilds_it_after_a_restart(
    broker: RunningBroker, tmp_path: Path
) -> None:
    settings = settings_for(broker, clean_topic="vd-clean", alerts_topic="vd-alerts")
    create_topics(broker.bootstrap, {"vd-clean": 4, "vd-alerts": 4})
    reply = assistant(TEXT, thinking="Check the rollout.")
    cli_copy = assistant(TEXT, api="cli", usage=None)
    first = [user("deploy?"), reply, custom(), cli_copy]
    clean, alerts = worker_outputs("vd-1", first)
    asyncio.run(publish(settings, "vd-alerts", alerts))
    asyncio.run(publish(settings, "vd-clean", clean))
    token_file = tmp_path / "secrets" / "verdicts.token"
    service = VerdictService(settings, token_file, tmp_path / "verdicts.log").start()
    try:
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        answer = service.verdicts("vd-1", cli_copy["id"])
        assert (answer["processed"], answer["dropped"]) == (True, {cli_copy["id"]: reply["id"]})
        assert service.get(f"/v1/verdicts?session=vd-1&through={cli_copy['id']}",
                           token="not-the-token")[0] == 401

        # a later turn: not processed until its records are on the topics, then answered
        question = user("and now?")
        answer_2 = assistant("Nothing else changed.", thinking="Look again.")
        clean, alerts = worker_outputs("vd-1", [*first, question, answer_2])
        assert not service.verdicts("vd-1", answer_2["id"])["processed"]
        asyncio.run(publish(settings, "vd-clean", clean[-2:]))
        deadline = time.monotonic() + 30
        while not service.verdicts("vd-1", answer_2["id"])["processed"]:
            assert time.monotonic() < deadline, service.log()
            time.sleep(0.05)
        assert service.stop() == 0

        service.start()  # the same token file, the same answers, from the topics alone
        assert service.verdicts("vd-1", answer_2["id"]) == {
            "session": "vd-1", "through": answer_2["id"], "ready": True, "processed": True,
            "dropped": {cli_copy["id"]: reply["id"]}, "reason": None}
    finally:
        service.stop()
