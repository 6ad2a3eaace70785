"""A worker without a broker says so and exits instead of hanging."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from stream.brokers import free_port


def test_unreachable_broker_exits_non_zero_after_the_deadline() -> None:
    url = f"kafka://127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSION_STREAM_")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "stream.cli", "worker", "--broker", url,
         "--startup-deadline", "3"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 1
    assert f"no Kafka broker answered at {url} within 3s" in done.stderr
    assert f"broker {url} not reachable yet" in done.stderr  # the retries are logged
    assert elapsed < 30
