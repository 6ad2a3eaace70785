"""What 0.3.0 (the last commit that wrote state format 3) does with the state of this version
during a rolling upgrade: it refuses a newer format (FormatTooNew, which stops its worker at
recovery) rather than misreading it, and continues what a worker upgrading from it
(`--upgrade-from 0.3`) wrote, every redelivery dropped as one (docs/upgrading.md)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from stream.worker import codec
from tests.support import old_release
from tests.support.state_stores import after_the_first_part, fixture_halves, process, store_after

LAST_FORMAT_3 = "2825abc"


@pytest.fixture(scope="module")
def format_3_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return old_release.source_tree(LAST_FORMAT_3, "the last that wrote state format 3",
                                   tmp_path_factory)


def test_0_3_0_refuses_a_newer_format_and_continues_what_a_worker_upgrading_from_it_wrote(
        format_3_tree: Path) -> None:
    first, rest = fixture_halves()
    later, again = after_the_first_part(first, rest)
    new = store_after(first)
    upgrading = store_after(first, state_format=3)
    uninterrupted = store_after(first, state_format=3)

    refused = old_release.process(format_3_tree, (new._sessions, new._memory), again)
    read = old_release.process(format_3_tree, (upgrading._sessions, upgrading._memory),
                               later + again)

    assert refused.error is not None and refused.error.startswith(
        f"FormatTooNew: a table value holds state format {codec.STATE_FORMAT}, newer than "
        "session-stream 0.3.0 "
        "reads (state format 3)")
    assert "unreadable state" not in refused.log
    assert read.error is None and "unreadable state" not in read.log
    assert read.kinds.count("redelivery") > len(again) / 2
    expected = process(uninterrupted, later + again).outputs
    assert read.outputs == [[out.topic, orjson.loads(out.value).get("kind")]
                            for out in expected]
