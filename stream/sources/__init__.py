"""Live sources of the input topic: OpenClaw's session files (`follow`) and its agent
databases (`follow-sqlite`), both publishing through `stream.sources.produce`'s producer."""
