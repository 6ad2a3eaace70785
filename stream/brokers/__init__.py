"""Local Kafka-protocol brokers for development and tests: Tansu or Apache Kafka."""

from __future__ import annotations

from stream.brokers.kafka import start_kafka
from stream.brokers.local import (
    BrokerKind,
    BrokerStartError,
    RunningBroker,
    free_port,
)
from stream.brokers.tansu import start_tansu

BROKER_KINDS: tuple[BrokerKind, ...] = ("tansu", "kafka")

__all__ = [
    "BROKER_KINDS",
    "BrokerKind",
    "BrokerStartError",
    "RunningBroker",
    "free_port",
    "start_broker",
    "start_kafka",
    "start_tansu",
]


def start_broker(kind: str, port: int | None = None) -> RunningBroker:
    """Start a broker of `kind` ("tansu" or "kafka") on 127.0.0.1 and wait until ready."""
    if kind == "tansu":
        return start_tansu(port)
    if kind == "kafka":
        return start_kafka(port)
    raise ValueError(f"unknown broker kind {kind!r}; expected one of {BROKER_KINDS}")
