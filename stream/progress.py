"""The progress line a long-running source or memory writer logs every so often, and once more
when it stops: what it did since the line before and since it started, so an operator who
tails its log sees it work. A quiet spell logs nothing: a line per interval of nothing would
only grow the log of a service that runs for months."""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter
from collections.abc import Callable

from stream.settings import positive_seconds

DEFAULT_INTERVAL = 60.0

log = logging.getLogger(__name__)


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """`--progress-interval`, for the commands that log a progress line."""
    parser.add_argument(
        "--progress-interval",
        type=positive_seconds,
        default=DEFAULT_INTERVAL,
        metavar="S",
        help="log what was done every this many seconds, when something was "
        "(default %(default)s), and once more on stop",
    )


class Progress:
    """Counts things under names (`records`, `lines`...) and says them as `what` does."""

    def __init__(self, what: str, interval: float = DEFAULT_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.interval = interval
        self.clock = clock
        self.total: Counter[str] = Counter()
        self._recent: Counter[str] = Counter()
        self._since = clock()

    def add(self, **counts: int) -> None:
        self.total.update(counts)
        self._recent.update(counts)
        if self.clock() - self._since >= self.interval:
            self.report()

    def report(self) -> None:
        """The line, now, if anything happened since the last one."""
        elapsed = self.clock() - self._since
        if any(self._recent.values()):
            log.info("%s: %s in the last %.0f s (%s since start)", self.what,
                     _say(self._recent), elapsed, _say(self.total))
        self._recent.clear()
        self._since = self.clock()

    def stopped(self) -> None:
        log.info("%s: stopped; %s since start", self.what, _say(self.total) or "nothing")


def _say(counts: Counter[str]) -> str:
    return ", ".join(f"{count} {name}" for name, count in counts.items())
