"""Fixtures shared by the whole suite: the real data folders and the local broker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from stream.brokers import RunningBroker, start_broker

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
FIXTURES = SHARED / "fixtures"
CORPUS = SHARED / "corpus"


@pytest.fixture(scope="session")
def broker() -> Iterator[RunningBroker]:
    """One broker for the session: Tansu by default, Apache Kafka with
    SESSION_STREAM_TEST_BROKER=kafka."""
    kind = os.environ.get("SESSION_STREAM_TEST_BROKER", "tansu")
    running = start_broker(kind)
    try:
        yield running
    finally:
        running.stop()
