"""The formats of what session-stream stores, beside the package's version.

What outlives a process and is read by the next version that runs: the worker's table values
and changelog records (`STATE_FORMAT`, stream.worker.codec), the live sources' positions files
(`POSITIONS_FORMAT`, stream.sources.positions) and the memory writer's files, whose index has
kept its one layout since it was written first (its format is not named in it yet). A version
reads every named format it ever wrote and refuses a newer one with `FormatTooNew`, which stops
a command with one line naming both formats and exit code `EXIT_CODE` (docs/upgrading.md).
"""

from __future__ import annotations

from stream import __version__

# The newest state format each earlier release reads: `--upgrade-from RELEASE` makes a worker
# write that format while workers of RELEASE may still take partitions back (docs/upgrading.md).
READS_STATE: dict[str, int] = {"0.1": 1, "0.2": 2, "0.3": 3}

# 1 is a failure, 2 a usage error (argparse), 3 a stalled worker (stream.worker.app).
EXIT_CODE = 4


class FormatTooNew(Exception):
    """Stored data written in a format newer than this version reads.

    Not a ValueError: the callers that treat an unreadable value as absent (a session state
    they start afresh) must not treat a newer one so, since that misreads it silently."""

    def __init__(self, what: str, where: str, found: int, known: int) -> None:
        super().__init__(
            f"{where} holds {what} format {found}, newer than session-stream {__version__} "
            f"reads ({what} format {known}); run the version that wrote it or a later one "
            "(docs/upgrading.md)"
        )
        self.what = what
        self.where = where
        self.found = found
        self.known = known


def upgrade_from(text: str) -> str:
    """An argparse type: a release named in READS_STATE (0.1.0 is 0.1), or empty for none."""
    text = text.strip()
    release = ".".join(text.split(".")[:2])
    if text and release not in READS_STATE:
        known = ", ".join(READS_STATE)
        raise ValueError(f"--upgrade-from takes one of {known} (or nothing), not {text!r}")
    return release if text else ""


def state_format_for(release: str) -> int | None:
    """The state format a worker upgrading from `release` writes; None: its own."""
    return READS_STATE[release] if release else None
