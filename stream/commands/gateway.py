"""`session-stream gateway`: publish OpenClaw transcripts as the Gateway's event bus announces
them, each entry read byte for byte from the agent's SQLite store.

Connects to the Gateway (WebSocket protocol v4) as a read-only backend operator, subscribes to
every session's events, and on each one publishes the session's new store rows to the input
topic, keyed by session id, with the agent id, session key and window as headers. The store is
polled too, every --poll-interval, and after each reconnect. The token comes from
$OPENCLAW_GATEWAY_TOKEN or --token-file (a password from $OPENCLAW_GATEWAY_PASSWORD or
--password-file); no flag takes the secret itself, which would show in the process list.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TextIO

from stream.commands.publishing import add_source_arguments, run
from stream.openclaw import PASSWORD_ENV, TOKEN_ENV
from stream.settings import Settings, add_options, positive_int
from stream.sources.base import Source, SourceError
from stream.sources.gateway.projection import ProjectedSource
from stream.sources.gateway.protocol import Auth
from stream.sources.gateway.source import Gateway, GatewaySource
from stream.sources.gateway.stores import Stores
from stream.sources.sqlite import DEFAULT_PAGE_SIZE
from stream.sources.store.reader import zstd_decompressor

DEFAULT_URL = "ws://127.0.0.1:18789"
DEFAULT_CHECKPOINT = ".session-stream/gateway.checkpoint.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=DEFAULT_URL, help="the Gateway (default %(default)s)")
    secret = parser.add_mutually_exclusive_group()
    secret.add_argument(
        "--token-file", type=Path, metavar="FILE",
        help=f"file holding the gateway token (default: ${TOKEN_ENV})",
    )
    secret.add_argument(
        "--password-file", type=Path, metavar="FILE",
        help=f"file holding the gateway password (default: ${PASSWORD_ENV})",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--state-dir", type=Path, metavar="DIR",
        help="OpenClaw's state folder, holding agents/<agent>/agent/openclaw-agent.sqlite "
        "(default: $OPENCLAW_STATE_DIR, else ~/.openclaw)",
    )
    where.add_argument("--store", type=Path, metavar="PATH", help="one agent store file")
    where.add_argument(
        "--projected", action="store_true",
        help="no store: publish the events' display projection, marked as such (for a "
        "remote gateway; not the transcript, see docs/sources.md)",
    )
    parser.add_argument(
        "--agent", action="append", default=[], metavar="ID",
        help="follow this agent (repeatable; default: every agent in the state folder)",
    )
    parser.add_argument(
        "--page-size", type=positive_int, default=DEFAULT_PAGE_SIZE, metavar="N",
        help="most events read per query and sent per batch (default %(default)s)",
    )
    add_source_arguments(parser, DEFAULT_CHECKPOINT)
    add_options(parser, ("startup_deadline",), connection=False)


def credentials(args: argparse.Namespace) -> Auth:
    """Read on every connection attempt, so a rotated token file is picked up."""
    if args.token_file is not None:
        return Auth(token=_read_secret(args.token_file))
    if args.password_file is not None:
        return Auth(password=_read_secret(args.password_file))
    if os.environ.get(TOKEN_ENV):
        return Auth(token=os.environ[TOKEN_ENV])
    if os.environ.get(PASSWORD_ENV):
        return Auth(password=os.environ[PASSWORD_ENV])
    raise SourceError(
        f"no gateway secret: set ${TOKEN_ENV} (or ${PASSWORD_ENV}), or give --token-file "
        "or --password-file"
    )


def _read_secret(path: Path) -> str:
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise SourceError(f"cannot read the gateway secret file {path}: {error}") from error
    if not secret:
        raise SourceError(f"the gateway secret file {path} is empty")
    return secret


def open_source(args: argparse.Namespace) -> Source:
    if not args.once:
        credentials(args)  # fail now, not at the first connection, when there is no secret
    gateway = Gateway(
        args.url, lambda: credentials(args), Settings.load(args).startup_deadline
    )
    if args.projected:
        return ProjectedSource(gateway)
    return GatewaySource(
        gateway,
        Stores.of(args.state_dir, args.store, args.agent),
        args.checkpoint,
        poll_interval=args.poll_interval,
        page_size=args.page_size,
        decompress=zstd_decompressor(),
    )


def main(args: argparse.Namespace, stderr: TextIO | None = None) -> int:
    """Exit 0 when stopped by a signal (or done, with --once: the stores read to their end,
    without connecting), 1 when the gateway refused or never answered within the start-up
    deadline, or on a broker, store or checkpoint error."""
    return run("gateway", lambda: open_source(args), args, stderr)
