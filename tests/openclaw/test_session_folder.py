"""A real OpenClaw 2026.5.12 through `follow DIR`, the broker, the worker and the memory writer.

2026.5.12 writes JSONL transcripts beside runtime traces, and has the two original defects:
after every normal turn an `api:"cli"` copy of the reply (after `openclaw.cache-ttl` and
`openclaw:bootstrap-context:full`), and its Telegram bot mirrors each channel reply as a
delivery-mirror row with the same text. One scenario per module, driven once: three turns in
one session (two Anthropic-messages, one openai-completions), a `send` with new text and one
repeating the last reply after it, two Telegram DMs; then `follow` over the agents folder,
the worker, and the memory writer from the clean and from the raw topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from stream.brokers import RunningBroker
from tests.support.openclaw import shapes
from tests.support.openclaw.gateway import (
    COMPLETIONS_MODEL_ID,
    COMPLETIONS_PROVIDER,
    MAIN_SESSION_KEY,
    Gateway,
)
from tests.support.openclaw.memory import (
    MemoryRun,
    findable,
    reply_rows,
    report,
    reset,
    run_memory,
)
from tests.support.openclaw.pipeline import (
    Offline,
    Outputs,
    clean_offline,
    publish,
    read_per_key,
    repeated_lines,
    run_worker,
    settings_for,
    without_source,
    write_memory,
)

pytestmark = [
    pytest.mark.openclaw,
    pytest.mark.integration,
    pytest.mark.parametrize("openclaw_release", ["2026.5.12"], indirect=True, scope="module"),
]

SESSION = "oc-files-a"
NEW_KEY, AGAIN_KEY = "mirror-new-1", "mirror-again-1"
NEW_TEXT = "The report is ready; I sent it to you separately."
DMS = ("Hi from Telegram, anything new?", "And what about the weekend?")


@dataclass
class FolderRun:
    gateway: Gateway
    transcripts: dict[str, list[bytes]]  # per session id, its transcript file's lines
    dm_session: str
    folder_names: list[str]  # what the sessions folder held
    published: int
    inputs: dict[str, list[bytes]]
    outputs: Outputs
    offline: Offline
    memory: dict[str, list[str]]  # from the clean topic
    raw_memory: dict[str, list[str]]  # from the input topic
    memory_dir: Path  # the clean topic's memory files

    def entries(self, session: str) -> list[dict]:
        return shapes.parsed(self.transcripts[session])


@pytest.fixture(scope="module")
def folder_run(
    openclaw_gateway: Gateway, broker: RunningBroker, tmp_path_factory: pytest.TempPathFactory
) -> FolderRun:
    gateway = openclaw_gateway
    work = tmp_path_factory.mktemp("folder-run")
    settings = settings_for(broker, "oc-files", work)

    gateway.run_turn(SESSION, "What is on the list for today?")
    gateway.run_turn(SESSION, "And for tomorrow?")
    gateway.run_turn(SESSION, "Both days in one line, please.",
                     model=f"{COMPLETIONS_PROVIDER}/{COMPLETIONS_MODEL_ID}")
    reply = shapes.replies(shapes.parsed(gateway.transcripts()[SESSION]))[-1]
    key = gateway.session_key(SESSION)
    # 2026.5.12 writes no mirror for a send equal to the latest assistant row; after one with
    # new text, the reply's text is written again.
    for text, idempotency_key in ((NEW_TEXT, NEW_KEY), (shapes.text(reply), AGAIN_KEY)):
        gateway.send(text, session_key=key, idempotency_key=idempotency_key)
        gateway.wait_for_entry(
            SESSION, lambda e, k=idempotency_key: shapes.idempotency_key(e) == k,
            f"the mirror of the send {idempotency_key}")
    for text in DMS:
        gateway.telegram_dm(text)

    published = publish("follow", gateway.state_dir / "agents", settings,
                        work / "follow.checkpoint.json")
    transcripts = gateway.transcripts()
    outputs = run_worker(settings, work / "worker.log", sum(map(len, transcripts.values())))
    return FolderRun(
        gateway, transcripts, gateway.session_id(MAIN_SESSION_KEY) or "",
        sorted(p.name for p in gateway.sessions_dir.iterdir()), published,
        read_per_key(settings, settings.input_topic), outputs,
        clean_offline(gateway.sessions_dir, work / "offline"),
        write_memory(settings, work / "memory"),
        write_memory(settings, work / "raw-memory", topic="input"),
        work / "memory",
    )


def expected_drops(entries: list[dict]) -> list[tuple[str, str, str]]:
    """(rule, entry id, id of the reply it repeats) of every cli copy and every mirror whose
    text is that of the turn's reply, when no other assistant row came between them: OpenClaw's
    writer and Gateway compare a mirror with the latest assistant row, so a send after a send
    of other words is a send of its own."""
    drops = []
    for index, entry in enumerate(entries):
        reply = shapes.latest_reply_before(entries, index)
        if reply is None or shapes.text(entry) != shapes.text(reply):
            continue
        between = entries[entries.index(reply) + 1 : index]
        if any(shapes.role(e) == "assistant" and shapes.text(e) != shapes.text(reply)
               for e in between):
            continue
        if shapes.is_cli_copy(entry):
            drops.append(("cli_mirror_duplicate", entry["id"], reply["id"]))
        elif shapes.is_mirror(entry):
            drops.append(("delivery_mirror_duplicate", entry["id"], reply["id"]))
    return drops


def test_the_folder_holds_the_shapes_the_other_tests_rely_on(folder_run: FolderRun) -> None:
    entries = folder_run.entries(SESSION)
    replies = shapes.replies(entries)
    assert [shapes.block_types(r) for r in replies] == [
        ["thinking", "text"], ["thinking", "text"], ["text"]]
    # Each turn ends: reply, [cache-ttl,] bootstrap-context, the cli copy of the reply.
    for reply, with_cache_ttl in zip(replies, (True, True, False), strict=True):
        start = entries.index(reply)
        tail = entries[start + 1 : start + (4 if with_cache_ttl else 3)]
        assert [shapes.is_custom(e, shapes.CACHE_TTL) for e in tail[:-2]] == [with_cache_ttl] * (
            len(tail) - 2)
        assert shapes.is_custom(tail[-2], shapes.BOOTSTRAP_CONTEXT)
        assert shapes.is_cli_copy(tail[-1]) and shapes.text(tail[-1]) == shapes.text(reply)
        assert tail[-1]["message"]["usage"] == reply["message"]["usage"]
    mirrors = [e for e in entries if shapes.is_mirror(e)]
    assert [(shapes.idempotency_key(m), shapes.text(m)) for m in mirrors] == [
        (NEW_KEY, NEW_TEXT), (AGAIN_KEY, shapes.text(replies[2]))]
    # The DMs: each reply followed by cache-ttl, bootstrap-context and the bot's mirror.
    dm = folder_run.entries(folder_run.dm_session)
    dm_replies = shapes.replies(dm)
    assert len(dm_replies) == len(DMS)
    for reply in dm_replies:
        start = dm.index(reply)
        ttl, bootstrap, mirror = dm[start + 1 : start + 4]
        assert shapes.is_custom(ttl, shapes.CACHE_TTL)
        assert shapes.is_custom(bootstrap, shapes.BOOTSTRAP_CONTEXT)
        assert shapes.is_mirror(mirror) and shapes.text(mirror) == shapes.text(reply)
        assert mirror["message"]["api"] == "openai-responses"
        assert shapes.idempotency_key(mirror) is None
    assert not [e for e in dm if shapes.is_cli_copy(e)]
    # What lies beside the transcripts: runtime traces and their pointers, Telegram state.
    names = set(folder_run.folder_names)
    for session in folder_run.transcripts:
        assert {f"{session}.jsonl", f"{session}.trajectory.jsonl",
                f"{session}.trajectory-path.json"} <= names
    assert {"sessions.json.telegram-messages.json",
            "sessions.json.telegram-sent-messages.json"} <= names


def test_every_transcript_line_reaches_the_input_topic_once_and_no_trace_line(
    folder_run: FolderRun,
) -> None:
    assert folder_run.inputs == folder_run.transcripts
    assert folder_run.published == sum(map(len, folder_run.transcripts.values()))


def drops_by_session(folder_run: FolderRun) -> dict[str, list[tuple[str, str, str]]]:
    return {session: [(a["kind"], a["entry_id"], a["related_entry_id"])
                      for a in folder_run.outputs.drops() if a["session_id"] == session]
            for session in folder_run.transcripts}


def test_every_cli_copy_and_bot_mirror_is_dropped_and_nothing_else(folder_run: FolderRun) -> None:
    expected = {session: expected_drops(folder_run.entries(session))
                for session in folder_run.transcripts}
    # the 3 cli copies; one bot mirror per DM
    assert [len(expected[SESSION]), len(expected[folder_run.dm_session])] == [3, len(DMS)]
    assert {kind for drops in expected.values() for kind, _, _ in drops} == {
        "cli_mirror_duplicate", "delivery_mirror_duplicate"}
    assert drops_by_session(folder_run) == expected
    assert folder_run.outputs.dead_letters == []
    # Besides the drops, one alert: three of the session's replies were copied.
    assert [(a["kind"], a["session_id"], a["action"]) for a in folder_run.outputs.alerts
            if a["action"] != "dropped"] == [("duplicate_storm", SESSION, "kept")]
    dropped = {entry_id for drops in expected.values() for _, entry_id, _ in drops}
    for session, rows in folder_run.transcripts.items():
        kept = [raw for raw in rows if orjson.loads(raw)["id"] not in dropped]
        clean = folder_run.outputs.clean[session]
        assert [orjson.loads(r)["id"] for r in clean] == [orjson.loads(r)["id"] for r in kept]
        # Byte for byte, but for a dropped copy's child: it names the copy's nearest kept
        # ancestor instead.
        parents = {orjson.loads(r)["id"]: orjson.loads(r).get("parentId") for r in rows}
        for raw, out in zip(kept, clean, strict=True):
            parent = orjson.loads(raw).get("parentId")
            if parent in dropped:
                while parent in dropped:
                    parent = parents[parent]
                assert orjson.loads(out) == {**orjson.loads(raw), "parentId": parent}
            else:
                assert out == raw


def test_a_sent_mirror_repeating_the_reply_after_a_new_text_mirror_is_kept(
    folder_run: FolderRun,
) -> None:
    """Two `send`s after the reply: one with new words, then one with the reply's words. The
    second is a message sent to the channel again, after another: OpenClaw's writer and Gateway
    compare a mirror with the latest assistant row (here the first send) and keep it; so does
    the engine (precision first), and the memory file holds it as a delivered message."""
    entries = folder_run.entries(SESSION)
    again = next(e for e in entries if shapes.idempotency_key(e) == AGAIN_KEY)
    assert again["id"] not in {entry_id for _, entry_id, _ in drops_by_session(folder_run)[SESSION]}
    assert any(orjson.loads(raw)["id"] == again["id"]
               for raw in folder_run.outputs.clean[SESSION])


def test_clean_over_the_real_folder_reads_no_trace_and_agrees_with_the_worker(
    folder_run: FolderRun,
) -> None:
    assert folder_run.offline.dead_letters == []
    assert not [a for a in folder_run.offline.alerts if a["kind"] == "malformed_entry"]
    assert folder_run.offline.clean == folder_run.outputs.clean
    assert {without_source(a) for a in folder_run.offline.alerts} == {
        without_source(a) for a in folder_run.outputs.alerts}


def test_the_memory_file_has_no_doubled_line(folder_run: FolderRun) -> None:
    assert repeated_lines(folder_run.memory) == {}
    # Written from the raw topic, the copies double lines: the check above can fail.
    assert repeated_lines(folder_run.raw_memory)
    # Every reply is in its session's memory once.
    for session in folder_run.transcripts:
        texts = [shapes.text(r) for r in shapes.replies(folder_run.entries(session))]
        lines = folder_run.memory[session]
        assert all(lines.count(f"assistant: {text}") == 1 for text in texts), lines


# --- OpenClaw's own memory, fed from the clean topic ------------------------------------------

REPLY_QUERY = "Reply"  # a word of every stand-in reply (tests/support/openclaw/model.py)


@pytest.fixture(scope="module")
def memory_run(folder_run: FolderRun) -> MemoryRun:
    """The memory files written from the clean topic, then `/new` from Telegram: a reset of
    the session whose replies the bot mirrored (session-memory writes its file), one `openclaw
    memory index` and two searches over our files, that file and OpenClaw's sessions source."""
    hook_file = reset(folder_run.gateway, None)
    return run_memory(folder_run.gateway, folder_run.memory_dir, folder_run.memory_dir.parent,
                      hook_file, [REPLY_QUERY, NEW_TEXT])


def test_openclaw_memory_search_finds_each_reply_once_in_our_files(
    folder_run: FolderRun, memory_run: MemoryRun
) -> None:
    rows = reply_rows(memory_run, REPLY_QUERY, folder_run.transcripts, folder_run.outputs.clean)
    print(f"\nOpenClaw {folder_run.gateway.release.version}, search {REPLY_QUERY!r}:\n"
          + report(rows))
    assert {text: row["ours"] for text, row in rows.items()} == {
        text: row["expected"] for text, row in rows.items()}
    # Every reply OpenClaw copied (the cli copy after each turn, the bot's mirror of each DM
    # reply) is held more often by its own sessions source than by our files.
    assert len(rows) == 3 + len(DMS)
    assert all(row["sessions"][1] > row["ours"][1] for row in rows.values()), rows
    new = memory_run.counts(NEW_TEXT, NEW_TEXT)
    print(report({NEW_TEXT: new}))
    assert new["ours"] == (1, 1), new  # the mirror with new text is found too


def test_every_kept_user_and_assistant_text_is_in_what_openclaw_indexed_from_our_files(
    folder_run: FolderRun, memory_run: MemoryRun
) -> None:
    kept = [shapes.text(entry) for rows in folder_run.outputs.clean.values()
            for entry in shapes.parsed(rows)
            if shapes.role(entry) in ("user", "assistant") and shapes.text(entry).strip()]
    assert len(kept) >= 10
    missing = [text[:80] for text in kept if not findable(text, memory_run.our_chunks)]
    assert missing == []
    assert memory_run.hook_file.read_text().startswith("# Session: ")
