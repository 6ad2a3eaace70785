"""Fixtures shared by the whole suite: the real data folders and the local broker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from stream.brokers import RunningBroker



@pytest.fixture(scope="session")
def broker() -> Iterator[RunningBroker]:
    """One broker for the session: Tansu by default, Apache Kafka with
    SESSION_STREAM_TEST_BROKER=kafka."""
    from stream.brokers import start_broker

    kind = os.environ.get("SESSION_STREAM_TEST_BROKER", "tansu")
    running = start_broker(kind)
    try:
        yield running
    finally:
        running.stop()
