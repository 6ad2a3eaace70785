"""session-stream: cleans AI-agent session transcripts in flight."""

# What users see moves this (CHANGELOG.md); pyproject.toml reads it from here.
__version__ = "0.4.0"
