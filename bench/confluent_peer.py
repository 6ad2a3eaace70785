"""The librdkafka ceiling: bench/raw_peer.py's passthrough on confluent-kafka instead of aiokafka.

Runs in bench/.venv-quix, where confluent-kafka is (Quix Streams is built on it); it imports
nothing of this project. The same loop as the aiokafka passthrough: consume a batch -> produce
every record (same key, value and partition) -> wait for delivery -> commit, and the same
producer settings as the project's producer (acks=all, 10 ms linger, 1 MiB batches).

`python bench/confluent_peer.py --bootstrap H:P --input T --output T --group G` runs until
SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys

from confluent_kafka import Consumer, Producer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="confluent_peer")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--session-timeout", type=int, default=10, help="seconds")
    args = parser.parse_args(argv)
    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": args.session_timeout * 1000,
        "heartbeat.interval.ms": 1_000,
    })
    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        "acks": "all",
        "linger.ms": 10,
        "batch.size": 1024 * 1024,
    })
    consumer.subscribe([args.input])
    failed: list = []

    def delivered(error, _record) -> None:
        if error is not None:
            failed.append(error)

    try:
        while not stopping:
            records = [r for r in consumer.consume(args.batch, timeout=0.2) if not r.error()]
            for record in records:
                _produce(producer, args.output, record, delivered)
            if records:
                # every delivery acknowledged before the offsets that produced them commit
                if producer.flush(30) != 0 or failed:
                    raise RuntimeError(f"deliveries failed or pending: {failed[:3]}")
                consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return 0


def _produce(producer: Producer, topic: str, record, delivered) -> None:
    while True:
        try:
            producer.produce(topic, record.value(), record.key(), partition=record.partition(),
                             on_delivery=delivered)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.1)


if __name__ == "__main__":
    sys.exit(main())
