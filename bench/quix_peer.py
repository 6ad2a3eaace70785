"""The leading Python peer: Quix Streams doing the same per-session state lookup and update.

Runs in its own virtualenv (bench/.venv-quix, made by the harness on demand): quixstreams is not
a dependency of the project, so this file imports nothing from it. For every entry it reads the
session's state in Quix's RocksDB store (backed by a changelog topic), writes it back updated
and sends the entry on. Defaults everywhere (commit every 5 s), except a short consumer
session timeout (a flag) so the group joins quickly on the local broker, and an output
timestamp of the time it was produced (Quix otherwise copies the input's, which would hide
when the output was made).

`python bench/quix_peer.py --bootstrap H:P --input T --output T --group G --state-dir D`
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import orjson
from quixstreams import Application


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="quix_peer")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--session-timeout", type=int, default=10, help="seconds")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        loglevel="WARNING",
        consumer_extra_config={"session.timeout.ms": args.session_timeout * 1000,
                               "heartbeat.interval.ms": 1_000},
    )
    source = app.topic(args.input, key_deserializer="str", value_deserializer="bytes")
    output = app.topic(args.output, key_serializer="str", value_serializer="bytes")

    def update(value: bytes, state) -> bytes:
        entry = orjson.loads(value)
        current = state.get("session") or {"count": 0, "last": None}
        state.set("session", {"count": current["count"] + 1, "last": entry.get("id")})
        return value

    sdf = app.dataframe(source)
    sdf = sdf.apply(update, stateful=True)
    sdf = sdf.set_timestamp(lambda value, key, timestamp, headers: int(time.time() * 1000))
    sdf.to_topic(output)
    app.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
