"""The verdict service: which transcript entries session-stream dropped, per session, for the
OpenClaw context engine (openclaw-plugin/) to leave out of what the model is sent.

`index` holds what is known (pure, no Kafka, no clock), `records` reads the clean and alert
topics' records into it, `follow` keeps it current from the broker, `server` answers on
loopback. docs/context-engine.md has the design and the wiring.
"""
