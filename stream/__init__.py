"""session-stream: cleans AI-agent session transcripts in flight."""
