"""`produce`, the worker and `tail` talk TLS to a broker whose client listener is SSL only.

Runs against Apache Kafka (SESSION_STREAM_TEST_BROKER=kafka) with a broker of its own, since
the shared one is plaintext; the embedded Tansu 0.6.0 has no working TLS listener.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from stream.brokers.kafka import TlsKafka, start_kafka
from stream.commands.clean import clean_session
from stream.consumers.tail import format_record
from stream.engine import Engine
from stream.settings import Settings
from stream.sources.produce import read_session
from tests.support.data import FIXTURES
from tests.support.harness import (
    WorkerProcess,
    kafka_only,
    wait_until,
    worker_settings,
)

# Ten lines, one of them an exact delivery-mirror duplicate the worker drops.
SESSION_FILE = (
    FIXTURES / "0c4e9163-2c40-4265-ab6e-a52f5dd1cd99.jsonl.reset.2026-04-05T04-22-28.629Z"
    ".excerpt.jsonl"
)

pytestmark = kafka_only(
    "the embedded Tansu 0.6.0 cannot serve TLS (see docs/brokers.md)"
)


@pytest.fixture(scope="module")
def tls_kafka() -> Iterator[TlsKafka]:
    broker = start_kafka(tls=True)
    try:
        yield broker
    finally:
        broker.stop()


def cli(settings: Settings, *args: str, timeout: float = 90.0) -> subprocess.CompletedProcess:
    """`session-stream ARGS` configured by SESSION_STREAM_* variables only, as in deployment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSION_STREAM_")}
    env.update({f"SESSION_STREAM_{k.upper()}": str(v) for k, v in settings.__dict__.items()})
    return subprocess.run(
        [sys.executable, "-m", "stream.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def expected_clean_lines(path: Path) -> list[str]:
    """What `tail --topic clean` prints for the entries `session-stream clean` keeps."""
    session_id, lines = read_session(path)
    verdicts = clean_session(Engine(), session_id, path.name, enumerate(lines, 1))
    key = session_id.encode()
    return [
        format_record("clean", SimpleNamespace(key=key, value=verdict.output))
        for verdict in verdicts
        if verdict.output is not None
    ]


def tls_settings(broker: TlsKafka, name: str, tmp_path: Path, **changes: object) -> Settings:
    return worker_settings(
        broker, name, tmp_path, security_protocol="SSL", ssl_cafile=str(broker.ca_path), **changes
    )


def test_produce_worker_and_tail_over_tls(tls_kafka: TlsKafka, tmp_path: Path) -> None:
    settings = tls_settings(tls_kafka, "tls", tmp_path)
    expected = expected_clean_lines(SESSION_FILE)
    assert len(expected) == 9  # the excerpt's ten lines less the mirror duplicate
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        produced = cli(settings, "produce", str(SESSION_FILE))
        assert produced.returncode == 0, produced.stderr
        assert "produced 10 records of 1 sessions from 1 files" in produced.stderr

        tailed: list[str] = []
        alerts = ""

        def outputs_arrived() -> bool:
            nonlocal tailed, alerts
            clean = cli(settings, "tail", "--topic", "clean")
            assert clean.returncode == 0, clean.stderr
            # At-least-once may repeat a record; the first occurrences must be the kept lines.
            # each line starts with the record's Kafka time
            tailed = list(dict.fromkeys(line.split(" ", 1)[1]
                                        for line in clean.stdout.splitlines()))
            found = cli(settings, "tail", "--topic", "alerts")
            assert found.returncode == 0, found.stderr
            alerts = found.stdout
            return len(tailed) >= len(expected) and "delivery_mirror_duplicate" in alerts

        try:
            wait_until(outputs_arrived, 120, "the cleaned entries and the alert")
        except TimeoutError:
            pytest.fail(f"clean: {tailed}\nalerts: {alerts}\nworker:\n{worker.log_tail()}")
        assert tailed == expected
        wait_until(lambda: (worker.stats() or {}).get("entries_in") == 10, 30, "the stats")
    finally:
        worker.stop()


def test_the_listener_speaks_tls_only(tls_kafka: TlsKafka, tmp_path: Path) -> None:
    # A TLS handshake against the broker's CA succeeds, with a certificate for 127.0.0.1...
    context = ssl.create_default_context(cafile=str(tls_kafka.ca_path))
    with (
        socket.create_connection(("127.0.0.1", tls_kafka.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() in {"TLSv1.2", "TLSv1.3"}

    # ...while a plaintext Kafka client gets no answer from the same port,
    plain = worker_settings(tls_kafka, "tls-plain", tmp_path)
    assert plain.security_protocol == "PLAINTEXT"
    refused = cli(plain, "tail", "--topic", "clean")
    assert refused.returncode == 1
    assert "cannot read tls-plain-clean from the Kafka broker" in refused.stderr
    assert "Unable to bootstrap" in refused.stderr

    # ...and a TLS client that does not trust the broker's CA rejects its certificate.
    untrusting = worker_settings(tls_kafka, "tls-untrusted", tmp_path, security_protocol="SSL")
    rejected = cli(untrusting, "tail", "--topic", "clean")
    assert rejected.returncode == 1
    assert "Unable to bootstrap" in rejected.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in rejected.stderr
