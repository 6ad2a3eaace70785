"""The ceiling of this stack: a raw aiokafka group consumer -> producer passthrough, no processing.

`python -m bench.raw_peer --bootstrap H:P --input T --output T --group G` runs until SIGTERM:
getmany -> send every record (same key, value and partition) -> wait for delivery -> commit.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def run(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    consumer = AIOKafkaConsumer(
        args.input,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_timeout * 1000,
        heartbeat_interval_ms=1_000,
    )
    # The same producer settings as the project's producer (stream/kafka/producer.py).
    producer = AIOKafkaProducer(
        bootstrap_servers=args.bootstrap, acks="all", linger_ms=10, max_batch_size=1024 * 1024
    )
    await consumer.start()
    await producer.start()
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=200, max_records=args.batch)
            pending = [
                await producer.send(args.output, record.value, key=record.key,
                                    partition=tp.partition)
                for tp, records in batches.items()
                for record in records
            ]
            if pending:
                await asyncio.gather(*pending)
                await consumer.commit()
    finally:
        await producer.stop()
        await consumer.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.raw_peer")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--session-timeout", type=int, default=10, help="seconds")
    asyncio.run(run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
