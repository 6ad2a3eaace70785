"""The soak at a small size: with a short TTL the worker forgets idle sessions, so its tables
stay far below the number of sessions streamed. `python -m tests.support.soak` runs the issue's
size (1 M entries over 100 k sessions) and prints the curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.soak import SoakConfig, report, run_soak

pytestmark = pytest.mark.integration

ENTRIES, SESSIONS = 20_000, 2_000


def test_a_short_ttl_keeps_the_tables_far_below_the_sessions_streamed(broker, tmp_path: Path):
    # Paced, so the streaming phase spans several samples however fast the worker is.
    config = SoakConfig(entries=ENTRIES, sessions=SESSIONS, ttl=3.0, sweep=1.0, sample=1.0,
                        active=200, ahead=4000, rate=4000.0, batch_size=500, tail=6.0,
                        drain_timeout=60.0, workdir=str(tmp_path), quiet=True)
    result = run_soak(config, broker)
    print(report(result))

    assert result.entries_in == result.produced >= ENTRIES
    streaming = [s for s in result.samples if s.phase == "stream"]
    assert len(streaming) >= 3 and len(result.samples) >= 6
    assert all(s.rss_mb > 0 for s in result.samples)
    # every streamed session went idle and was forgotten (one expired early and seen again
    # would be forgotten twice, hence >=)
    assert result.forgotten >= SESSIONS
    final = result.samples[-1]
    assert final.sessions_keys <= SESSIONS // 100  # about the tick session alone
    assert final.memory_keys < ENTRIES // 100
    # while streaming, the table held about the sessions seen within ttl + sweep, not all
    assert max(s.sessions_keys for s in streaming) < SESSIONS
    assert result.verdict["samples"] == len(streaming)
