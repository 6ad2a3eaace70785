"""A real OpenClaw 2026.9.6 through `follow-sqlite`, the broker and the worker.

One scenario per module, driven once: three turns in one session (two Anthropic-messages
replies `[thinking, text]` each followed by `openclaw.cache-ttl`, one openai-completions reply),
a `send` that repeats the last reply and one with new text (delivery mirrors with idempotency
keys), a long turn in a second session (stored zstd-compressed), a Telegram DM, a first
`follow-sqlite --once`, a gateway restart, one more turn, a second `follow-sqlite --once` from
the checkpoint, then the worker over the input topic. The tests read what came out.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from stream.brokers import RunningBroker
from stream.settings import Settings
from tests.support.openclaw import shapes
from tests.support.openclaw.gateway import COMPLETIONS_MODEL_ID, COMPLETIONS_PROVIDER, Gateway
from tests.support.openclaw.memory import (
    MemoryRun,
    apply_wiring,
    documented_wiring,
    findable,
    phrase,
    reply_rows,
    report,
    reset,
    run_memory,
)
from tests.support.openclaw.pipeline import (
    Offline,
    Outputs,
    clean_rows_offline,
    publish,
    read_per_key,
    run_worker,
    settings_for,
    without_source,
    write_memory,
)

pytestmark = [
    pytest.mark.openclaw,
    pytest.mark.integration,
    pytest.mark.parametrize("openclaw_release", ["2026.9.6"], indirect=True, scope="module"),
]

SESSION, LONG_SESSION = "oc-store-a", "oc-store-b"
REPEAT_KEY, NEW_KEY = "mirror-repeat-1", "mirror-new-1"
NEW_TEXT = "The report is ready; I sent it to you separately."
LONG_MESSAGE = "Please keep these notes: " + " ".join(f"note-{i}" for i in range(900))


@dataclass
class StoreRun:
    gateway: Gateway
    rows: dict[str, list[bytes]]  # the store at the end, per session in seq order
    compressed: int  # rows stored zstd-compressed (event_json NULL)
    published: tuple[int, int]  # by the two follow-sqlite runs
    rows_at_first_run: int
    inputs: dict[str, list[bytes]]  # the input topic per key, in offset order
    outputs: Outputs
    offline: Offline
    settings: Settings
    work: Path

    def entries(self, session: str) -> list[dict]:
        return shapes.parsed(self.rows[session])


@pytest.fixture(scope="module")
def store_run(
    openclaw_gateway: Gateway, broker: RunningBroker, tmp_path_factory: pytest.TempPathFactory
) -> StoreRun:
    gateway = openclaw_gateway
    work = tmp_path_factory.mktemp("store-run")
    settings = settings_for(broker, "oc-store", work)
    checkpoint = work / "follow-sqlite.checkpoint.json"

    gateway.run_turn(SESSION, "What is on the list for today?")
    gateway.run_turn(SESSION, "And for tomorrow?")
    gateway.run_turn(SESSION, "Both days in one line, please.",
                     model=f"{COMPLETIONS_PROVIDER}/{COMPLETIONS_MODEL_ID}")
    reply = shapes.replies(shapes.parsed(gateway.transcripts()[SESSION]))[-1]
    key = gateway.session_key(SESSION)
    for text, idempotency_key in ((shapes.text(reply), REPEAT_KEY), (NEW_TEXT, NEW_KEY)):
        gateway.send(text, session_key=key, idempotency_key=idempotency_key)
        gateway.wait_for_entry(
            SESSION, lambda e, k=idempotency_key: shapes.idempotency_key(e) == k,
            f"the mirror of the send {idempotency_key}")
    gateway.run_turn(LONG_SESSION, LONG_MESSAGE)
    gateway.telegram_dm("Hi from Telegram, anything new?")

    first = publish("follow-sqlite", gateway.store_path, settings, checkpoint)
    rows_at_first_run = sum(map(len, gateway.transcripts().values()))
    gateway.restart()
    gateway.run_turn(SESSION, "One more thing, after the restart.")
    second = publish("follow-sqlite", gateway.store_path, settings, checkpoint)

    rows = gateway.transcripts()
    with sqlite3.connect(f"file:{gateway.store_path}?mode=ro", uri=True) as db:
        (compressed,) = db.execute(
            "SELECT count(*) FROM transcript_events WHERE event_json IS NULL").fetchone()
    outputs = run_worker(settings, work / "worker.log", sum(map(len, rows.values())))
    return StoreRun(
        gateway, rows, compressed, (first, second), rows_at_first_run,
        read_per_key(settings, settings.input_topic), outputs, clean_rows_offline(rows, work),
        settings, work,
    )


def test_the_store_holds_the_shapes_the_other_tests_rely_on(store_run: StoreRun) -> None:
    entries = store_run.entries(SESSION)
    replies = shapes.replies(entries)
    assert [shapes.block_types(r) for r in replies] == [
        ["thinking", "text"], ["thinking", "text"], ["text"], ["thinking", "text"]]
    assert all(r["message"]["content"][0].get("thinkingSignature")
               for r in replies if shapes.block_types(r)[0] == "thinking")
    # An Anthropic-messages reply is followed by openclaw.cache-ttl; the completions one not.
    after = [entries[entries.index(r) + 1] for r in replies]
    assert [shapes.is_custom(e, shapes.CACHE_TTL) for e in after] == [True, True, False, True]
    users = [e for e in entries if shapes.role(e) == "user"]
    assert len(users) == 4
    assert all(shapes.idempotency_key(u).endswith(":user") for u in users)
    mirrors = [e for e in entries if shapes.is_mirror(e)]
    assert [(shapes.idempotency_key(m), shapes.text(m)) for m in mirrors] == [
        (REPEAT_KEY, shapes.text(replies[2])), (NEW_KEY, NEW_TEXT)]
    assert store_run.compressed >= 1  # the long turn: follow-sqlite decompressed it
    assert not list(store_run.gateway.state_dir.rglob("*.jsonl"))  # no transcript files
    dm_session = next(s for s in store_run.rows if s not in (SESSION, LONG_SESSION))
    dm_user = next(e for e in store_run.entries(dm_session) if shapes.role(e) == "user")
    assert shapes.idempotency_key(dm_user).startswith("channel-user:v1:")


def test_every_store_row_reaches_the_input_topic_once_in_order_byte_for_byte(
    store_run: StoreRun,
) -> None:
    assert store_run.inputs == store_run.rows
    total = sum(map(len, store_run.rows.values()))
    first, second = store_run.published
    # The second run, after the gateway restart, sent only what was new since the first.
    assert (first, second) == (store_run.rows_at_first_run, total - store_run.rows_at_first_run)


def test_the_clean_topic_is_what_clean_gives_for_the_same_rows(store_run: StoreRun) -> None:
    assert store_run.outputs.clean == store_run.offline.clean
    assert {without_source(a) for a in store_run.outputs.alerts} == {
        without_source(a) for a in store_run.offline.alerts}
    assert store_run.outputs.dead_letters == store_run.offline.dead_letters == []


def test_the_mirror_repeating_a_reply_is_dropped_and_nothing_else(store_run: StoreRun) -> None:
    entries = store_run.entries(SESSION)
    repeat = next(e for e in entries if shapes.idempotency_key(e) == REPEAT_KEY)
    new = next(e for e in entries if shapes.idempotency_key(e) == NEW_KEY)
    repeated = shapes.replies(entries)[2]
    assert [(a["kind"], a["session_id"], a["entry_id"], a["related_entry_id"], a["action"])
            for a in store_run.outputs.alerts] == [
        ("delivery_mirror_duplicate", SESSION, repeat["id"], repeated["id"], "dropped")]
    # Every other row is kept, in order; byte for byte but for the one whose parent was the
    # dropped mirror (the new-text mirror), which now names the mirror's parent.
    expected = {
        session: [raw for raw in rows if orjson.loads(raw)["id"] != repeat["id"]]
        if session == SESSION else rows
        for session, rows in store_run.rows.items()
    }
    clean = store_run.outputs.clean
    assert {s: len(v) for s, v in clean.items()} == {s: len(v) for s, v in expected.items()}
    for session, rows in expected.items():
        for raw, kept in zip(rows, clean[session], strict=True):
            if orjson.loads(raw).get("parentId") == repeat["id"]:
                assert orjson.loads(kept) == {**orjson.loads(raw), "parentId": repeat["parentId"]}
            else:
                assert kept == raw
    kept_new = next(orjson.loads(r) for r in clean[SESSION] if orjson.loads(r)["id"] == new["id"])
    assert shapes.text(kept_new) == NEW_TEXT
    assert store_run.outputs.dead_letters == []


# --- OpenClaw's own memory, fed from the clean topic ------------------------------------------

REPLY_QUERY = "Reply"  # a word of every stand-in reply (tests/support/openclaw/model.py)


@pytest.fixture(scope="module")
def memory_run(store_run: StoreRun) -> MemoryRun:
    """Our memory files from the clean topic, then a reset of the session whose reply the
    delivery mirror repeated (session-memory writes its file), one `openclaw memory index` and
    two searches over our files, that file and OpenClaw's sessions source."""
    ours = store_run.work / "memory-clean"
    write_memory(store_run.settings, ours)
    hook_file = reset(store_run.gateway, store_run.gateway.session_key(SESSION))
    return run_memory(store_run.gateway, ours, store_run.work, hook_file,
                      [REPLY_QUERY, NEW_TEXT])


def test_openclaw_memory_search_finds_each_reply_once_in_our_files(
    store_run: StoreRun, memory_run: MemoryRun
) -> None:
    rows = reply_rows(memory_run, REPLY_QUERY, store_run.rows, store_run.outputs.clean)
    print(f"\nOpenClaw {store_run.gateway.release.version}, search {REPLY_QUERY!r}:\n"
          + report(rows))
    assert {text: row["ours"] for text, row in rows.items()} == {
        text: row["expected"] for text, row in rows.items()}
    assert {row["expected"] for row in rows.values()} == {(1, 1)}
    # OpenClaw's own sessions source holds the reply the mirror repeated twice, in one chunk
    # (the measurement); its session-memory file as it is.
    repeated = phrase(shapes.replies(store_run.entries(SESSION))[2])
    assert rows[repeated]["sessions"] == (1, 2), rows[repeated]
    new = memory_run.counts(NEW_TEXT, NEW_TEXT)
    print(report({NEW_TEXT: new}))
    assert new["ours"] == (1, 1), new  # the mirror with new text is found too


def test_every_kept_user_and_assistant_text_is_in_what_openclaw_indexed_from_our_files(
    store_run: StoreRun, memory_run: MemoryRun
) -> None:
    kept = [shapes.text(entry) for rows in store_run.outputs.clean.values()
            for entry in shapes.parsed(rows)
            if shapes.role(entry) in ("user", "assistant") and shapes.text(entry).strip()]
    assert len(kept) >= 12
    missing = [text[:80] for text in kept if not findable(text, memory_run.our_chunks)]
    assert missing == []


def test_our_files_carry_the_session_facts_the_store_knew(memory_run: MemoryRun) -> None:
    text = memory_run.files[SESSION]
    assert text.startswith("# Session: 20")
    assert f"- **Session Key**: agent:main:explicit:{SESSION}\n" in text
    assert f"- **Session ID**: {SESSION}\n" in text
    assert "- **Agent**: main\n" in text
    # the hook's own file, for comparison, is in its format
    assert memory_run.hook_file.read_text().startswith("# Session: ")


def test_the_documented_wiring_is_config_openclaw_takes(store_run: StoreRun) -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "memory.md"
    commands, configs = documented_wiring(docs)
    assert commands[0] == "openclaw hooks disable session-memory"
    assert all(c["memory"]["search"]["sources"] == ["memory"] for c in configs)
    assert all(c["memory"]["search"]["rememberAcrossConversations"] is False for c in configs)
    config = apply_wiring(store_run.gateway, docs, store_run.work / "wired.json")
    assert config["hooks"]["internal"]["entries"]["session-memory"]["enabled"] is False
    assert config["memory"]["search"]["sources"] == ["memory"]
    assert config["memory"]["search"]["rememberAcrossConversations"] is False
    dreaming = config["plugins"]["entries"]["memory-core"]["config"]["dreaming"]
    assert dreaming["enabled"] is False
