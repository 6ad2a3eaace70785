"""`session-stream broker`: the broker of a state folder alone, in the foreground.

Apache Kafka (single-node KRaft) with its data in <state>/kafka, formatted at the first start,
its ports chosen then and kept; it needs Java 17+, and the first start assembles the jars
(Maven). `--memory-only` runs the embedded Tansu broker instead, which keeps nothing across a
restart. The process becomes the broker (exec), so a signal sent to it reaches the broker
itself: SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from stream.brokers.home import MEMORY_ONLY_WARNING, LocalBroker, assemble_note, local_broker
from stream.brokers.kafka import kafka_version
from stream.brokers.local import BrokerStartError
from stream.service.layout import StateDir, add_state_dir_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_state_dir_argument(parser)
    add_broker_arguments(parser)


def add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--memory-only", action="store_true",
        help="the embedded Tansu broker instead of Apache Kafka: no Java needed, nothing kept "
        "across a restart",
    )
    parser.add_argument(
        "--broker-port", type=int, default=None, metavar="PORT",
        help="the broker's port at its first start (default 9092 when free); kept after",
    )


def prepare(state: StateDir, memory_only: bool, port: int | None) -> LocalBroker:
    """BrokerStartError when it cannot run here (no Java, a port taken)."""
    kind = "tansu" if memory_only else "kafka"
    return local_broker(kind, state.broker(kind), port)


def describe(broker: LocalBroker) -> str:
    if broker.durable:
        return (f"Apache Kafka {kafka_version()} at {broker.url}, durable: its data in "
                f"{broker.folder / 'data'}")
    return f"Tansu at {broker.url}, memory-only: {MEMORY_ONLY_WARNING}"


def main(args: argparse.Namespace, stderr: TextIO | None = None) -> int:
    """Runs until stopped; exit 2 when the broker cannot run here (said in one line)."""
    stderr = stderr or sys.stderr
    try:
        broker = prepare(StateDir.of(args.state_dir), args.memory_only, args.broker_port)
        if broker.durable and (note := assemble_note()):
            print(f"session-stream broker: {note}", file=stderr, flush=True)
        command = broker.command()
    except BrokerStartError as error:
        print(f"session-stream broker: {error}", file=stderr)
        return 2
    print(f"session-stream broker: {describe(broker)}", file=stderr, flush=True)
    os.chdir(broker.folder)
    os.execvpe(command[0], command, broker.environment())
