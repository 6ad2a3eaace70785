"""Fixtures shared by the whole suite: the real data folders and the local broker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from stream.brokers import RunningBroker, start_broker

# The project's own copy of the real data its tests use (tests/data/README.md says what it is).
DATA = Path(__file__).resolve().parent / "data"
FIXTURES = DATA / "fixtures"
CORPUS = DATA / "corpus"


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
