"""A worker without a broker says so and exits instead of hanging."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import pytest

from stream.brokers import free_port
from stream.settings import log_level


def test_unreachable_broker_exits_non_zero_after_the_deadline() -> None:
    url = f"kafka://127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSION_STREAM_")}
    started = time.monotonic()
    done = subprocess.run(
        # "WARNING" spelled the way Python's logging and most tools spell it
        [sys.executable, "-m", "stream.cli", "worker", "--broker", url,
         "--startup-deadline", "3", "--log-level", "WARNING"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 1
    assert f"no Kafka broker answered at {url} within 3s" in done.stderr
    assert f"broker {url} not reachable yet" in done.stderr  # the retries are logged
    assert elapsed < 30


@pytest.mark.parametrize(("given", "level"), [
    ("debug", "debug"), ("INFO", "info"), ("warn", "warning"), ("Warning", "warning"),
    ("error", "error"), ("critical", "critical"),
])
def test_log_levels_take_their_usual_names(given: str, level: str) -> None:
    assert log_level(given) == level


def test_an_unknown_log_level_is_a_usage_error() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="unknown log level 'loud'"):
        log_level("loud")
