"""`session-stream verdicts`: which entries session-stream dropped, per session, answered on
loopback for the OpenClaw context engine (openclaw-plugin/, docs/context-engine.md).

Reads every partition of the clean and alert topics from their oldest records, keeps per
session the ids of the dropped entries and the last entries processed, and answers
`GET http://127.0.0.1:PORT/v1/verdicts` for requests that carry the token of --token-file. A
missing token file is created with a new random token (mode 0600), for the plugin's
`tokenFile` to name the same file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import secrets
import signal
import sys
from pathlib import Path
from typing import TextIO

from aiokafka.errors import KafkaError

from stream.consumers.verdicts.follow import follow
from stream.consumers.verdicts.index import VerdictIndex
from stream.consumers.verdicts.server import HOST, make_app, serve
from stream.kafka.consumer import cannot_read
from stream.kafka.retry import quiet_client_logs
from stream.settings import Settings, add_options

DEFAULT_PORT = 6067


class TokenFileError(Exception):
    pass


class ListenError(Exception):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--token-file", type=Path, required=True, metavar="FILE",
        help="the token every request must carry (created, mode 0600, when missing)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT,
        help="loopback port to answer on (default %(default)s)",
    )
    add_options(parser, ("clean_topic", "alerts_topic", "max_ids", "session_ttl",
                         "ttl_sweep_interval", "log_level"))


def token_from(path: Path) -> str:
    """The token in `path`, or a new one written there."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = secrets.token_urlsafe(32)
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                file.write(token + "\n")
        except FileExistsError:
            return token_from(path)  # another process made it first: use that one
        except OSError as error:
            raise TokenFileError(f"cannot create {path}: {error}") from error
        return token
    except (OSError, UnicodeDecodeError) as error:
        raise TokenFileError(f"cannot read {path}: {error}") from error
    if not token:
        raise TokenFileError(f"{path} is empty")
    return token


async def serve_verdicts(settings: Settings, token: str, port: int) -> None:
    """Answer on loopback while the index follows the topics, until cancelled."""
    index = VerdictIndex(settings.max_ids, settings.session_ttl)
    ready = asyncio.Event()
    try:
        runner = await serve(make_app(index, ready, token), port)
    except OSError as error:
        raise ListenError(f"cannot listen on {HOST}:{port}: {error}") from error
    logging.getLogger(__name__).info("answering on http://%s:%d", HOST, port)
    try:
        await follow(settings, index, ready)
    finally:
        await runner.cleanup()


def main(args: argparse.Namespace, stderr: TextIO | None = None) -> int:
    """Exit 0 on SIGTERM or Ctrl-C, 1 when the broker is not there or the port is taken, 2 on
    a token file that cannot be read or made."""
    stderr = stderr or sys.stderr
    settings = Settings.load(args)
    try:
        token = token_from(args.token_file)
    except TokenFileError as error:
        print(f"session-stream verdicts: --token-file {error}", file=stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(),
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    quiet_client_logs()
    try:
        asyncio.run(_until_signalled(serve_verdicts(settings, token, args.port)))
    except KeyboardInterrupt:
        return 0
    except ListenError as error:
        print(f"session-stream verdicts: {error}", file=stderr)
        return 1
    except (KafkaError, OSError) as error:
        print(cannot_read(settings, settings.clean_topic, error), file=stderr)
        return 1
    return 0


async def _until_signalled(work) -> None:
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task
