"""What 0.1.0 (the last commit that wrote state format 1) does with a state of a later format,
the mixed window of a one-round upgrade: it has no notion of formats and cannot refuse one. It
reads such a session as unreadable and starts it afresh, so it keeps the redeliveries it should
drop. This is why the upgrade from 0.1 takes two rounds (docs/upgrading.md): while an old worker
may take a partition back, new ones write format 1 (`--upgrade-from 0.1`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream.worker.tables import StoredSession, TableStore
from tests.support import old_release
from tests.support import state_format_fixture as fixture
from tests.support.builders import assistant, encode, header, user
from tests.support.state_stores import after_the_first_part, fixture_halves, store_after

LAST_FORMAT_1 = "a76737c"


@pytest.fixture(scope="module")
def format_1_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return old_release.source_tree(LAST_FORMAT_1, "the last that wrote state format 1",
                                   tmp_path_factory)


@pytest.mark.parametrize("state_format", [2, 3])
def test_0_1_0_reads_a_later_format_as_unreadable_and_keeps_what_it_should_drop(
        format_1_tree: Path, state_format: int) -> None:
    first, rest = fixture_halves()
    _, again = after_the_first_part(first, rest)
    new = store_after(first, state_format=state_format)  # a new worker wrote the state
    written_by_1 = store_after(first, state_format=1)

    misread = old_release.process(format_1_tree, (new._sessions, new._memory), again)
    read = old_release.process(format_1_tree, (written_by_1._sessions, written_by_1._memory),
                               again)

    # a later format: sessions started afresh, and each remembered value in the memory table
    # fails the engine (its entries become dead letters): nothing dropped as a redelivery
    assert misread.error is None
    assert "unreadable state of a session (ExtraData); starting it afresh" in misread.log
    assert "redelivery" not in misread.kinds
    assert misread.count("session-events-dlq") == (len(again) if new._memory else 0)
    # format 1, as `--upgrade-from 0.1` writes it: every redelivery dropped as one
    assert read.error is None and read.count("session-events-dlq") == 0
    assert read.kinds.count("redelivery") > len(again) / 2
    assert "entry_id_conflict" not in read.kinds


def test_0_1_0_continues_a_session_a_worker_upgrading_from_0_1_wrote_in_a_wake_turn(
        format_1_tree: Path) -> None:
    """A turn opened by a completion wake keeps three fields 0.2.0 added: format 1 leaves them
    out, or 0.1.0 would read the longer state as unreadable and start the session afresh."""
    session = {"s-wake": encode([
        header("s-wake"),
        user("what is the status?"),
        assistant("The build is green."),
        user("[Subagent Context] done", idempotency_key="announce:settle:main:run-1"),
    ])}
    current, upgrading = store_after(session), store_after(session, state_format=1)
    assert _wake_key(current) == "announce:settle:main:run-1"  # the wake turn is open
    assert _wake_key(upgrading) is None  # and left out of format 1

    again = fixture.records(session, {p: 100 for p in range(fixture.PARTITIONS)})
    read = old_release.process(format_1_tree, (upgrading._sessions, upgrading._memory), again)

    assert read.error is None
    assert "starting it afresh" not in read.log
    assert read.kinds.count("redelivery") == len(again)


def _wake_key(store: TableStore) -> str | None:
    (value,) = store._sessions.values()
    return StoredSession.from_bytes(value).state.announce_key
