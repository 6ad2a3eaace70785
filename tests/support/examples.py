"""How many examples the hypothesis properties draw, the same in every CI run."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# More examples for a long hunt: SESSION_STREAM_EXAMPLES=2000 pytest tests/engine/test_properties.py
SETTINGS = settings(
    max_examples=int(os.environ.get("SESSION_STREAM_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    # CI runs the same examples every time, so a red build always means a changed engine;
    # development runs explore new ones (SESSION_STREAM_EXAMPLES=2000 for a longer hunt).
    derandomize=os.environ.get("CI") == "true",
)
