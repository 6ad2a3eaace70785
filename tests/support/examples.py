"""How many examples the hypothesis properties draw, and which."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# A hunt for new cases draws more, and new ones each run:
# SESSION_STREAM_EXAMPLES=2000 pytest tests/engine/test_properties.py
_HUNT = os.environ.get("SESSION_STREAM_EXAMPLES")

SETTINGS = settings(
    max_examples=int(_HUNT or "120"),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    # Any other run, `make test` and the CI included, draws the same examples every time, so
    # a red run always means a changed engine and never a draw: whether a runner sets `CI`
    # does not decide it (.ci/run does not).
    derandomize=_HUNT is None,
)
