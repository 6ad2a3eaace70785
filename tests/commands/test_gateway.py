"""`session-stream gateway` as a process, against a broker and a fake gateway."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stream.brokers import RunningBroker
from tests.support.fake_gateway import (
    REFUSALS,
    TOKEN,
    FakeGateway,
    ThreadedGateway,
    session_message,
)
from tests.support.sources import records_with_headers
from tests.support.sqlite_store import create_openclaw_store, insert, open_window

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
STORE = "openclaw-agent.sqlite"


def command(state: Path, url: str, broker: RunningBroker, topic: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "stream.cli", "gateway", "--url", url, "--state-dir", str(state),
        "--checkpoint", str(state.parent / "gateway.json"), "--broker", broker.url,
        "--input-topic", topic, "--partitions", "2", *extra,
    ]


def test_events_are_published_from_the_store_with_their_headers(
    broker: RunningBroker, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    writer = create_openclaw_store(state / "agents" / "main" / "agent" / STORE)
    open_window(writer, "s", "agent:main:main")
    expected = insert(writer, "s", 0)
    environment = {**os.environ, "OPENCLAW_GATEWAY_TOKEN": TOKEN}
    with ThreadedGateway(FakeGateway()) as gateway:
        process = subprocess.Popen(
            command(state, gateway.url, broker, "gateway-events", "--poll-interval", "60"),
            cwd=ROOT, env=environment, stderr=subprocess.PIPE, text=True,
        )
        try:
            deadline = time.monotonic() + 30
            while not gateway.subscribed and time.monotonic() < deadline:
                time.sleep(0.05)
            expected += insert(writer, "s", 1)
            gateway.call(gateway.gateway.emit(session_message("main", "s", "k", 1)))
            time.sleep(1.5)
        finally:
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=30)
    writer.close()

    assert process.returncode == 0, stderr
    assert "published 2 records" in stderr
    assert TOKEN not in stderr
    published = records_with_headers(broker, "gateway-events")
    assert [(key, value) for key, value, _ in published] == [(b"s", v) for v in expected]
    assert published[0][2]["openclaw-session-key"] == b"agent:main:main"


def test_a_refused_token_exits_1_with_one_line_naming_the_url_and_the_code(
    broker: RunningBroker, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    create_openclaw_store(state / "agents" / "main" / "agent" / STORE).close()
    secret = "wrong-s3cret-value"
    (tmp_path / "token").write_text(secret + "\n")
    refusal = REFUSALS["AUTH_TOKEN_MISMATCH"]
    with ThreadedGateway(FakeGateway(answers=[refusal] * 100)) as gateway:
        done = subprocess.run(
            command(state, gateway.url, broker, "gateway-refused", "--token-file",
                    str(tmp_path / "token"), "--startup-deadline", "1"),
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )

    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"session-stream gateway: the gateway at {gateway.url} refused")
    assert "AUTH_TOKEN_MISMATCH (INVALID_REQUEST)" in last
    assert "Traceback" not in done.stderr
    assert secret not in done.stderr + done.stdout
