"""Where the project's own copy of the real data lives (tests/data/README.md says what it is)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"
FIXTURES = DATA / "fixtures"
CORPUS = DATA / "corpus"
REPORTED = DATA / "reported"
