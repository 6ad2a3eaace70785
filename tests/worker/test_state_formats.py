"""State formats across an upgrade (CHANGELOG.md, docs/upgrading.md): the state 0.1.0, 0.2.0
and 0.3.0 wrote is read and upgraded in place, a redelivery across the upgrade is still dropped
as one, a worker upgrading from a release writes what that release wrote, and a format newer
than this version reads is refused.

tests/data/state-format-1, -2 and -3 hold the changelog records older commits wrote for
the first half of the fixture sessions (tests/data/README.md says how they were made)."""

from __future__ import annotations

from pathlib import Path

import msgpack
import orjson
import pytest

import stream
from stream.engine import Engine, SessionState, stored
from stream.formats import FormatTooNew, state_format_for, upgrade_from
from stream.worker import codec
from stream.worker.processor import BatchProcessor
from stream.worker.tables import StoredSession, TableStore
from tests.support import state_format_fixture as fixture
from tests.support.state_stores import (
    SETTINGS,
    after_the_first_part,
    fixture_halves,
    new_store,
    process,
    store_after,
)

DATA = Path(__file__).parents[1] / "data"
FORMAT_1 = DATA / "state-format-1"
# The last commit that wrote format 1, and the last before 5ed614d changed the fingerprint
# every remembered entry keeps.
LAST_FORMAT_1 = FORMAT_1 / "a76737c.changelog.jsonl"
OLD_FINGERPRINT = FORMAT_1 / "1955465.changelog.jsonl"
# The last commit that wrote format 2 (0.2.0): every memory value in the memory table.
LAST_FORMAT_2 = DATA / "state-format-2" / "29b7df1.changelog.jsonl"
# The last commit that wrote format 3 (0.3.0): a small session's memory in its own value.
LAST_FORMAT_3 = DATA / "state-format-3" / "2825abc.changelog.jsonl"


def _session_ids(store: TableStore) -> set[str]:
    return {session_id for session_id, _, _ in store.sessions()}


def _stored_memory(store: TableStore) -> list[tuple[bytes, dict | None]]:
    """Each stored session's memory held in its stored value (None: in the memory table)."""
    return [(key, StoredSession.from_bytes(value).memory)
            for key, value in store._sessions.items()]


def _seen(outputs) -> list[tuple[str, bytes]]:
    return [(out.topic, out.value) for out in outputs]


def _kinds(outputs) -> list[str]:
    alerts = [out for out in outputs if out.topic == SETTINGS.alerts_topic]
    return [orjson.loads(out.value)["kind"] for out in alerts]


@pytest.mark.parametrize("changelog", [LAST_FORMAT_1, OLD_FINGERPRINT], ids=lambda p: p.stem)
def test_every_value_0_1_0_wrote_is_an_array_the_first_byte_tells_from_a_format_byte(
        changelog: Path) -> None:
    sessions, memory = fixture.read_changelog(changelog)

    assert sessions and memory
    for value in [*sessions.values(), *memory.values()]:
        assert codec.format_of(value) == 1
        assert isinstance(msgpack.unpackb(value), list)


def test_a_value_names_its_format_in_its_first_byte() -> None:
    value = ["e", 2**64 - 1, None, 7]

    packed = codec.pack(value)

    assert packed[0] == codec.STATE_FORMAT == 4
    assert codec.format_of(packed) == 4
    assert codec.unpack(packed) == value
    assert codec.pack(value, 2) == b"\x02" + msgpack.packb(value)  # what 0.2.0 reads
    assert codec.pack(value, 1) == msgpack.packb(value)  # what 0.1.0 reads
    assert codec.pack(value, 3) == b"\x03" + msgpack.packb(value)  # what 0.3.0 reads
    for state_format in (1, 2, 3):
        assert codec.format_of(codec.pack(value, state_format)) == state_format
        assert codec.unpack(codec.pack(value, state_format)) == value


@pytest.mark.parametrize(("given", "release", "state_format"),
                         [("0.1", "0.1", 1), ("0.1.0", "0.1", 1), ("0.2", "0.2", 2),
                          ("0.2.0", "0.2", 2), ("0.3", "0.3", 3), ("0.3.0", "0.3", 3),
                          ("", "", None)])
def test_upgrade_from_names_the_release_whose_format_is_written(
        given: str, release: str, state_format: int | None) -> None:
    assert upgrade_from(given) == release
    assert state_format_for(release) == state_format


def test_upgrade_from_refuses_a_release_it_does_not_know() -> None:
    with pytest.raises(ValueError, match=r"takes one of 0\.1, 0\.2, 0\.3 "):
        upgrade_from("0.4")


@pytest.mark.parametrize("changelog", [LAST_FORMAT_1, LAST_FORMAT_2, LAST_FORMAT_3],
                         ids=lambda p: p.stem)
def test_the_state_of_the_last_commit_of_a_format_continues_as_an_uninterrupted_run(
        changelog: Path) -> None:
    first, rest = fixture_halves()
    later, again = after_the_first_part(first, rest)
    uninterrupted = store_after(first)
    upgraded = new_store(fixture.read_changelog(changelog))

    expected = process(uninterrupted, later + again)
    got = process(upgraded, later + again)

    assert _seen(got.outputs) == _seen(expected.outputs)
    # the state is upgraded in place: every value written from now on is the current format
    assert {codec.format_of(r.value) for r in got.changelog if r.value} == {codec.STATE_FORMAT}
    assert _session_ids(upgraded) == _session_ids(uninterrupted)


@pytest.mark.parametrize("changelog",
                         [LAST_FORMAT_1, OLD_FINGERPRINT, LAST_FORMAT_2, LAST_FORMAT_3],
                         ids=lambda p: p.stem)
def test_an_entry_redelivered_across_the_upgrade_is_dropped_as_a_redelivery(
        changelog: Path) -> None:
    first, rest = fixture_halves()
    _, again = after_the_first_part(first, rest)
    upgraded = new_store(fixture.read_changelog(changelog))

    uninterrupted = store_after(first)

    got = process(upgraded, again)

    kinds = _kinds(got.outputs)
    assert "entry_id_conflict" not in kinds
    assert kinds.count("redelivery") > len(again) / 2
    assert _seen(got.outputs) == _seen(process(uninterrupted, again).outputs)


def test_a_worker_upgrading_from_0_2_writes_what_0_2_0_wrote() -> None:
    first, _ = fixture_halves()

    written = process(new_store(state_format=2), fixture.records(first)).changelog

    assert [(r.key, r.value) for r in written] == [
        fixture.decoded(orjson.loads(line)) for line in LAST_FORMAT_2.read_bytes().splitlines()]


def test_a_worker_upgrading_from_0_3_writes_what_0_3_0_wrote() -> None:
    first, _ = fixture_halves()

    written = process(new_store(state_format=3), fixture.records(first)).changelog

    assert [(r.key, r.value) for r in written] == [
        fixture.decoded(orjson.loads(line)) for line in LAST_FORMAT_3.read_bytes().splitlines()]


def _written(store: TableStore) -> tuple[dict[str, list], list[list]]:
    """Every memory value the store holds, by its key, and every stored state."""
    memory = {key.split(b"\x00", 1)[1].decode(): codec.unpack(value)
              for key, value in store._memory.items()}
    states = []
    for value in store._sessions.values():
        session = StoredSession.from_bytes(value)
        memory.update(session.memory or {})
        states.append(codec.unpack(value)[2])
    return memory, states


def _prefix(key: str) -> str:
    return max((prefix for prefix in stored.INTRODUCED if key.startswith(prefix)), key=len)


@pytest.mark.parametrize("state_format", [1, 2, 3])
def test_a_worker_writing_an_earlier_format_writes_nothing_format_4_added(
        state_format: int) -> None:
    # Format 1 is format 2 untagged: 0.1.0 reads the keys 0.2.0 added (test_format_1_reader.py).
    first, rest = fixture_halves()
    later, again = after_the_first_part(first, rest)
    store = store_after(first, state_format)
    process(store, later + again)
    newest = store_after(first)
    process(newest, later + again)

    memory, states = _written(store)
    newest_memory, _ = _written(newest)

    assert {stored.INTRODUCED[_prefix(key)] for key in newest_memory} >= {1, 2, 4}
    assert {stored.INTRODUCED[_prefix(key)] for key in memory} <= {1, 2}
    assert max(len(state) for state in states) <= stored.STATE_FIELDS[state_format]
    calls = [value for key, value in memory.items() if key.startswith(stored.TOOL_CALL)]
    assert calls and {len(value) for value in calls} == {2}  # [seq, issuing reply id]


def test_the_state_fields_each_format_holds_end_where_its_release_knew_them() -> None:
    names = SessionState.__dataclass_fields__
    assert list(names)[stored.STATE_FIELDS[1] - 1] == "heartbeat_silent"
    assert list(names)[stored.STATE_FIELDS[3] - 1] == "announce_key"
    assert stored.STATE_FIELDS[stored.STATE_FORMAT] == len(names)


def test_a_worker_upgrading_from_0_1_writes_what_0_1_0_reads() -> None:
    # 0.1.0 reads a value as MessagePack from its first byte: format 1 is format 2 untagged
    # (these sessions have no turn a completion wake opened: test_format_1_reader.py has one).
    first, _ = fixture_halves()

    untagged = process(new_store(state_format=1), fixture.records(first)).changelog
    tagged = process(new_store(state_format=2), fixture.records(first)).changelog

    assert [(r.key, r.value) for r in untagged] == [
        (r.key, r.value[1:] if r.value else r.value) for r in tagged]
    assert {codec.format_of(r.value) for r in untagged if r.value} == {1}
    assert {r.value[0] for r in tagged if r.value} == {2}


@pytest.mark.parametrize("release", ["0.1", "0.2"])
def test_a_worker_upgrading_from_a_release_moves_the_memory_a_newer_worker_kept_in_a_state(
        release: str) -> None:
    """Mid-upgrade, a worker of the second round (format 4) may write a session that one of
    the first round then takes over: it writes it in the old release's format, every value
    remembered in the memory table, and continues it as an uninterrupted run would."""
    first, rest = fixture_halves()
    later, again = after_the_first_part(first, rest)
    uninterrupted = store_after(first)
    newer = store_after(first)
    assert any(memory for _, memory in _stored_memory(newer))  # format 4 kept some there
    upgrading = new_store((newer._sessions, newer._memory), state_format_for(release))

    got = process(upgrading, later + again)

    assert _seen(got.outputs) == _seen(process(uninterrupted, later + again).outputs)
    assert {codec.format_of(r.value) for r in got.changelog if r.value} == {
        state_format_for(release)}
    assert all(memory is None for _, memory in _stored_memory(upgrading))


def test_a_value_of_a_newer_format_is_refused_naming_both_formats() -> None:
    future = bytes([5]) + msgpack.packb([1, 2, []])

    with pytest.raises(FormatTooNew) as refused:
        codec.check(future, "session-stream-sessions-changelog partition 1")

    assert str(refused.value).startswith(
        "session-stream-sessions-changelog partition 1 holds state format 5, newer than "
        f"session-stream {stream.__version__} reads (state format 4)")
    with pytest.raises(FormatTooNew):
        codec.unpack(future)


def test_a_session_of_a_newer_format_is_not_started_afresh() -> None:
    # An unreadable value is started afresh (a warning); a newer one must not be misread so.
    store = new_store(({b"s": bytes([5]) + msgpack.packb([1, 2, []])}, {}))
    first, _ = fixture_halves()
    session_id, lines = next(iter(first.items()))

    with pytest.raises(FormatTooNew):
        process(store, [(0, 0, b"s", lines[0])])
    assert session_id  # the fixture has sessions


def test_a_value_of_the_json_era_before_0a6424d_is_format_1_and_read() -> None:
    value = [1780000000, 1, [3, 12345678901234567890, 7]]

    written = orjson.dumps(value)

    assert codec.format_of(written) == 1
    assert codec.unpack(written) == value


@pytest.mark.parametrize("first_byte", [0x00, 0x01, 0x80, 0xA0, 0xC0, 0xFF])
def test_bytes_no_version_wrote_are_in_no_format(first_byte: int) -> None:
    with pytest.raises(ValueError, match=r"in no format|empty"):
        codec.format_of(bytes([first_byte, 0x90]))


def test_bytes_in_no_format_are_left_to_the_reader_that_starts_them_afresh() -> None:
    codec.check(b"\x00garbage", "a changelog")  # no refusal: not a newer format


@pytest.mark.parametrize("changelog", [LAST_FORMAT_1, LAST_FORMAT_2, LAST_FORMAT_3],
                         ids=lambda p: p.stem)
def test_sessions_an_older_release_wrote_are_forgotten_when_idle(changelog: Path) -> None:
    store = new_store(fixture.read_changelog(changelog))
    written = _session_ids(store)
    processor = BatchProcessor(Engine(), store, SETTINGS)

    assert processor.process([], fixture.NOW + SETTINGS.session_ttl - 1, sweep=True).forgotten == 0
    swept = processor.process([], fixture.NOW + SETTINGS.session_ttl + 1, sweep=True)

    assert swept.forgotten == len(written) > 0
    assert store.size() == (0, 0)
