"""session-stream: cleans AI-agent session transcripts in flight."""

from stream import pure

if pure.requested():
    pure.prefer_source()
