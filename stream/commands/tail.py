"""`session-stream tail`: its flags and exit codes; the reading is `stream.consumers.tail`'s."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from aiokafka.errors import KafkaError

from stream.consumers import tail as reading
from stream.consumers.tail import ROLES, tail, topic_of
from stream.kafka.consumer import TopicMissing, cannot_read
from stream.settings import Settings, add_options, positive_int

DESCRIPTION = reading.__doc__


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--topic", choices=ROLES, default="alerts", help="which topic to print (default alerts)"
    )
    parser.add_argument(
        "--follow", action="store_true", help="keep printing new records until Ctrl-C"
    )
    parser.add_argument(
        "--from-beginning",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="start at the oldest record (default); --no-from-beginning starts at the end",
    )
    parser.add_argument(
        "--max", type=positive_int, default=None, metavar="N", help="stop after N records"
    )
    add_options(parser, ("broker", "input_topic", "clean_topic", "alerts_topic", "dlq_topic"))


def main(
    args: argparse.Namespace, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Exit 0 after printing (or on Ctrl-C), 1 when the broker or the topic is not there."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    settings = Settings.load(args)
    topic = topic_of(settings, args.topic)
    try:
        asyncio.run(
            tail(
                settings,
                args.topic,
                follow=args.follow,
                from_beginning=args.from_beginning,
                limit=args.max,
                out=stdout,
            )
        )
    except KeyboardInterrupt:
        return 0
    except (KafkaError, TopicMissing) as error:
        print(cannot_read(settings, topic, error), file=stderr)
        return 1
    return 0
