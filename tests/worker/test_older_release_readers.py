"""What each release that wrote an earlier state format (0.2.0 and 0.3.0, their last commits)
does with the state of this version during a rolling upgrade: it refuses a newer format
(FormatTooNew, which stops its worker at recovery) rather than misreading it, and continues
what a worker upgrading from it (`--upgrade-from 0.2`, `0.3`) wrote, every redelivery dropped
as one (docs/upgrading.md). State format 1 has a test of its own (test_format_1_reader.py)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from stream.worker import codec
from tests.support import old_release
from tests.support.state_stores import after_the_first_part, fixture_halves, process, store_after

# release: (the state format it wrote, the last commit that wrote it)
RELEASES = {"0.2.0": (2, "29b7df1"), "0.3.0": (3, "2825abc")}


@pytest.fixture(scope="module", params=list(RELEASES))
def release(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int, Path]:
    state_format, commit = RELEASES[request.param]
    tree = old_release.source_tree(commit, f"the last that wrote state format {state_format}",
                                   tmp_path_factory)
    return request.param, state_format, tree


def test_an_older_release_refuses_a_newer_format_and_continues_what_an_upgrade_wrote(
        release: tuple[str, int, Path]) -> None:
    version, state_format, tree = release
    first, rest = fixture_halves()
    later, again = after_the_first_part(first, rest)
    new = store_after(first)
    upgrading = store_after(first, state_format=state_format)
    uninterrupted = store_after(first, state_format=state_format)

    refused = old_release.process(tree, (new._sessions, new._memory), again)
    read = old_release.process(tree, (upgrading._sessions, upgrading._memory), later + again)

    assert refused.error is not None and refused.error.startswith(
        f"FormatTooNew: a table value holds state format {codec.STATE_FORMAT}, newer than "
        f"session-stream {version} reads (state format {state_format})")
    assert "unreadable state" not in refused.log
    assert read.error is None and "unreadable state" not in read.log
    assert read.kinds.count("redelivery") > len(again) / 2
    expected = process(uninterrupted, later + again).outputs
    assert read.outputs == [[out.topic, orjson.loads(out.value).get("kind")]
                            for out in expected]
