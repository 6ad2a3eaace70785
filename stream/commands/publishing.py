"""What the source commands (`follow`, `follow-sqlite`, `gateway`) share: their flags and the
body of their main(), around the loop of `stream.sources.publish`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from aiokafka.errors import KafkaError

from stream.kafka.admin import ensure_input_topic
from stream.kafka.retry import quiet_client_logs
from stream.progress import Progress, add_progress_argument
from stream.settings import Settings, add_options, positive_seconds
from stream.sources.base import DEFAULT_POLL_INTERVAL, P, Source, SourceError
from stream.sources.positions import PositionsError
from stream.sources.publish import publish


def add_source_arguments(parser: argparse.ArgumentParser, default_checkpoint: str) -> None:
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=Path(default_checkpoint),
        metavar="FILE",
        help="where the position is kept across restarts (default %(default)s)",
    )
    parser.add_argument(
        "--poll-interval",
        type=positive_seconds,
        default=DEFAULT_POLL_INTERVAL,
        metavar="S",
        help="seconds between looks for new data (default %(default)s)",
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="publish what is there now, then exit (for tests and cron)",
    )
    add_progress_argument(parser)
    add_options(parser, ("broker", "partitions", "replication", "input_topic"))


def run(
    name: str,
    open_source: Callable[[], Source[P]],
    args: argparse.Namespace,
    stderr: TextIO | None = None,
) -> int:
    """The body of a source command's main(): exit 0 when stopped or done, 1 on any failure."""
    stderr = stderr or sys.stderr
    logging.basicConfig(
        level=logging.INFO, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s"
    )
    quiet_client_logs()
    settings = Settings.load(args)
    try:
        source = open_source()
    except (PositionsError, SourceError) as error:
        print(f"session-stream {name}: {error}", file=stderr)
        return 1
    progress = Progress(name, args.progress_interval)
    try:
        ensure_input_topic(settings)
        sent = asyncio.run(publish(settings, source, args.poll_interval, args.once, progress))
    except KafkaError as error:
        print(
            f"session-stream {name}: cannot publish to the Kafka broker at "
            f"{settings.bootstrap}: {error}",
            file=stderr,
        )
        return 1
    except (SourceError, OSError) as error:
        print(f"session-stream {name}: {error}", file=stderr)
        return 1
    finally:
        source.close()
    if not args.once:
        progress.stopped()
    print(f"session-stream {name}: published {sent} records to {settings.input_topic}", file=stderr)
    return 0
