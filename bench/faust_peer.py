"""What a user would write instead of the worker: a plain Faust agent, no tuning.

For every event it reads the session's entry in a Table keyed by session id, writes it back
updated, and sends the entry on to the output topic. Faust's defaults everywhere, except what
the local broker needs to let a consumer join quickly (a short session timeout) and a free port.

`python -m bench.faust_peer --broker kafka://H:P --input T --output T --group G --web-port N`
"""

from __future__ import annotations

import argparse
import sys

import faust
import orjson


def build(args: argparse.Namespace) -> faust.App:
    app = faust.App(
        args.group,
        broker=args.broker,
        store="memory://",
        datadir=args.data_dir,
        autodiscover=False,
        topic_partitions=4,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=float(args.session_timeout),
        broker_heartbeat_interval=1.0,
        web_host="127.0.0.1",
        web_port=args.web_port,
    )
    source = app.topic(args.input, key_type=bytes, value_type=bytes, key_serializer="raw",
                       value_serializer="raw", partitions=4)
    output = app.topic(args.output, key_serializer="raw", value_serializer="raw", partitions=4)
    sessions = app.Table("sessions", default=None, partitions=4)

    @app.agent(source, name="naive")
    async def naive(stream):
        async for event in stream.events():
            session_id = event.key.decode()
            entry = orjson.loads(event.value)
            state = sessions.get(session_id) or {"count": 0, "last": None}
            sessions[session_id] = {"count": state["count"] + 1, "last": entry.get("id")}
            await output.send(key=event.key, value=event.value)

    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.faust_peer")
    parser.add_argument("--broker", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--web-port", type=int, required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--session-timeout", type=int, default=10, help="seconds")
    app = build(parser.parse_args(argv))
    # info, as the worker: at warn faust.Worker sets the root logger to DEBUG for its spinner.
    faust.Worker(app, loglevel="info", quiet=True).execute_from_commandline()
    return 0


if __name__ == "__main__":
    sys.exit(main())
