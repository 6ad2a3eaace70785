"""What feeds the input topic: OpenClaw's session files (`produce`, `follow`) and its agent
databases (`follow-sqlite`), all publishing through `stream.kafka.producer`."""
