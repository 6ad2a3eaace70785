"""The progress line of the sources and the memory writer: every interval with news, and on stop."""

from __future__ import annotations

import logging

import pytest

from stream.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_interval_with_news_and_one_on_stop(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    caplog.set_level(logging.INFO, logger="stream.progress")
    clock = Clock()
    progress = Progress("gateway", 60.0, clock)
    progress.add(records=30)
    clock.now = 30.0
    progress.add(records=5)
    assert caplog.messages == []  # not due yet
    clock.now = 61.0
    progress.add(records=0)
    clock.now = 200.0
    progress.add(records=0)  # a quiet interval says nothing
    clock.now = 250.0
    progress.add(records=2)
    progress.stopped()
    assert caplog.messages == [
        "gateway: 35 records in the last 61 s (35 records since start)",
        "gateway: stopped; 37 records since start",
    ]
