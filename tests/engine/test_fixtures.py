"""The real OpenClaw files in tests/data/fixtures and the anonymized corpus in tests/data/corpus.

Expected drops and alerts per fixture are read off the fixture lines and SOURCES.md there:

* 0c4e9163 (excerpt): 3a93d381 is a `delivery-mirror` child of 9681ecc8 with identical text ->
  delivery_mirror_duplicate. 325c8666 is the message-tool mirror with *different* text: kept.
  383e493b gets two children (that mirror and the toolResult 40e87a98 of its own call): both
  exempt from branch_fork. The first entry names a parent outside the excerpt, so the start
  was not seen and no dangling_parent is raised.
* 1712e9d7 (excerpt): 0f533aab (whose parent 76dd5055 is in no line: the deleted user turn)
  directly follows the reply cbbfa1cf -> consecutive_assistant (info: no thinking); its exact
  delivery-mirror 9ff8a1b2 -> dropped, and the thinking_level_change bc125019 below it is
  re-parented to 0f533aab. The excerpt starts mid-session: dangling_parent stays silent.
* 03fa959b, 0a1672c7 (excerpts): header then a model_change with parentId null, so the session
  is seen from its start; the excerpt leaves out lines, so the first assistant's parent
  (6e28c335, c38a2189) is in no line -> dangling_parent. The prompt-errors say "aborted", not a
  thinking rejection; the last toolCall of 0a1672c7 has no result but no user ends the turn.
* 907f18e6: two 401 errors (one short of error_loop), user messages parented to cache-ttl
  entries: nothing.
* 732c6eb5 (a whole small session): a first delivery-mirror with new text, a reply whose only
  text block is whitespace, three answered tool calls: nothing dropped, nothing alerted.
* a1b2c3d4: a clean synthetic session; its checkpoint sibling and sessions.json are skipped.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from stream.commands.clean import clean_session
from stream.engine import Action, Engine, FileOrigin
from stream.engine.tally import Tally
from stream.sources.session_files import find_session_files, open_lines, session_id_of
from tests.support.builders import is_mirror, normalized_text
from tests.support.data import CORPUS, FIXTURES

EXPECTED = {
    "03fa959b-7248-40b8-b7da-fbf45d737122.jsonl.excerpt.jsonl": {
        "drops": {},
        "alerts": [("dangling_parent", "efdcd881", "6e28c335")],
    },
    "0a1672c7-3d9e-4dce-a97f-343bd3e85390.jsonl.excerpt.jsonl": {
        "drops": {},
        "alerts": [("dangling_parent", "febdce40", "c38a2189")],
    },
    "0c4e9163-2c40-4265-ab6e-a52f5dd1cd99.jsonl.reset.2026-04-05T04-22-28.629Z.excerpt.jsonl": {
        "drops": {"3a93d381": ("delivery_mirror_duplicate", "9681ecc8")},
        "alerts": [("delivery_mirror_duplicate", "3a93d381", "9681ecc8")],
    },
    "1712e9d7-7fce-42ea-a94e-2307730fc033.jsonl.reset.2026-04-02T04-12-41.459Z.excerpt.jsonl": {
        "drops": {"9ff8a1b2": ("delivery_mirror_duplicate", "0f533aab")},
        "alerts": [
            ("consecutive_assistant", "0f533aab", "cbbfa1cf"),
            ("delivery_mirror_duplicate", "9ff8a1b2", "0f533aab"),
        ],
        "reparented": {"bc125019": "0f533aab"},
    },
    "732c6eb5-d405-4b72-8301-8cd7e66600b8.jsonl.reset.2026-03-09T07-41-35.691Z": {
        "drops": {},
        "alerts": [],
    },
    "907f18e6-99b4-4d36-9568-71eba4d6a6c2.jsonl.reset.2026-03-09T07-41-22.318Z.excerpt.jsonl": {
        "drops": {},
        "alerts": [],
    },
    "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d.jsonl": {"drops": {}, "alerts": []},
}


def clean_file(path: Path):
    lines = list(open_lines(path))
    session_id = session_id_of(path, lines[0][1] if lines else None)
    verdicts = list(clean_session(Engine(), session_id, str(path), lines))
    return session_id, lines, verdicts


def test_the_shared_fixtures_are_present():
    assert FIXTURES.is_dir(), f"missing {FIXTURES}"
    assert (FIXTURES / "SOURCES.md").is_file()
    for name in EXPECTED:
        assert (FIXTURES / name).is_file(), name


def test_directory_walk_finds_the_sessions_and_skips_checkpoints_and_the_store():
    found = [p.name for p in find_session_files(FIXTURES)]
    assert sorted(found) == sorted(EXPECTED)
    assert (FIXTURES / "sessions.json").is_file()
    assert any(".checkpoint." in p.name for p in FIXTURES.iterdir())


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=lambda n: n[:8])
def test_fixture_drops_and_alerts(name):
    expected = EXPECTED[name]
    path = FIXTURES / name
    session_id, lines, verdicts = clean_file(path)
    header = json.loads(lines[0][1])
    assert header["type"] == "session"
    assert session_id == header["id"]

    ids = [json.loads(raw).get("id") for _, raw in lines]
    found_drops = {}
    for (number, _), entry_id, verdict in zip(lines, ids, verdicts, strict=True):
        if verdict.action is Action.DROPPED:
            (alert,) = verdict.alerts
            assert alert.entry_id == entry_id
            assert alert.source == FileOrigin(str(path), number)
            found_drops[entry_id] = (alert.kind, alert.related_entry_id)
    assert found_drops == expected["drops"]

    found_alerts = [(a.kind, a.entry_id, a.related_entry_id) for v in verdicts for a in v.alerts]
    assert sorted(found_alerts) == sorted(expected["alerts"])
    assert all(a.session_id == session_id for v in verdicts for a in v.alerts)
    assert not any(v.action is Action.DEAD_LETTERED for v in verdicts)

    # Kept lines pass byte for byte, except the children of dropped entries.
    reparented = expected.get("reparented", {})
    for (_, raw), entry_id, verdict in zip(lines, ids, verdicts, strict=True):
        if verdict.action is not Action.KEPT:
            continue
        if entry_id in reparented:
            assert json.loads(verdict.output) == {
                **json.loads(raw),
                "parentId": reparented[entry_id],
            }
        else:
            assert verdict.output == raw


def test_the_message_tool_mirror_with_new_text_is_kept():
    name = next(n for n in EXPECTED if n.startswith("0c4e9163"))
    _, lines, verdicts = clean_file(FIXTURES / name)
    by_id = {json.loads(raw)["id"]: v for (_, raw), v in zip(lines, verdicts, strict=True)}
    assert by_id["325c8666"].action is Action.KEPT
    assert by_id["40e87a98"].action is Action.KEPT


# --- the corpus ---------------------------------------------------------------------------------


def manifest() -> dict[str, dict]:
    with (CORPUS / "MANIFEST.tsv").open(newline="") as handle:
        return {row["relative_path"]: row for row in csv.DictReader(handle, delimiter="\t")}


@pytest.fixture(scope="module")
def corpus_run():
    assert CORPUS.is_dir(), f"missing {CORPUS}"
    results = {}
    for path in find_session_files(CORPUS):
        results[path.relative_to(CORPUS).as_posix()] = clean_file(path)
    return results


def test_corpus_files_are_the_manifest(corpus_run):
    assert sorted(corpus_run) == sorted(manifest())
    assert len(corpus_run) == 52


def test_corpus_accounting_balances(corpus_run):
    rows = manifest()
    total = Tally()
    for relative, (_, lines, verdicts) in corpus_run.items():
        tally = Tally()
        for verdict in verdicts:
            tally.add(verdict)
            total.add(verdict)
            named = [a for a in verdict.alerts if a.action is verdict.action]
            if verdict.action is Action.KEPT:
                assert verdict.output is not None
            else:
                assert len(named) == 1
        assert tally.balanced()
        assert tally.entries_in == len(lines) == int(rows[relative]["line_count"])
        assert tally.dead_lettered == 0
    assert total.balanced()
    assert total.entries_in == sum(int(r["line_count"]) for r in rows.values())


def _mirrors_repeating_a_reply(values: list[dict]) -> set[int]:
    """The rows of a session that are mirrors repeating a model reply, read from the file
    alone (docs/rules.md): an unkeyed mirror in a turn that made no message-tool call repeats
    a reply written since a person's last message; any other one the reply just before it or
    its parent."""
    found: set[int] = set()
    texts: set[str] = set()
    by_id = {value.get("id"): value for value in values}
    sent = False
    previous = ""
    for i, value in enumerate(values):
        message = value.get("message") if value.get("type") == "message" else None
        if not isinstance(message, dict):
            continue
        text = normalized_text(message)
        if message.get("role") == "user":
            sent = False
            provenance = message.get("provenance")
            if not isinstance(provenance, dict) or provenance.get("kind") == "external_user":
                texts = set()
        elif message.get("role") == "assistant" and text:
            if not is_mirror(message):
                texts.add(text)
                calls = [b for b in message.get("content") or [] if isinstance(b, dict)
                         and b.get("type") == "toolCall"]
                sent = sent or any(call.get("name") == "message" for call in calls)
            elif (not sent and "idempotencyKey" not in message and text in texts) or text in (
                    previous, normalized_text(by_id.get(value.get("parentId"), {}).get("message")
                                              or {})):
                found.add(i)
            previous = text
    return found


def test_corpus_drops_are_exactly_the_mirrors_that_repeat_their_reply(corpus_run):
    """Every drop in the real corpus is a mirror repeating a reply; the manifest counts those
    that repeat the assistant row just before them. A session delivers a turn's texts as
    mirrors after the turn's last reply: those are copies too (a kept row between a reply and
    its mirror hides no copy)."""
    rows = manifest()
    total = 0
    for relative, (_, lines, verdicts) in corpus_run.items():
        values = [json.loads(raw) for _, raw in lines]
        index = {v.get("id"): i for i, v in reversed(list(enumerate(values)))}
        dropped = {i for i, v in enumerate(verdicts) if v.action is Action.DROPPED}
        assert dropped == _mirrors_repeating_a_reply(values), relative
        assert len(dropped) >= int(rows[relative]["mirror_equals_prev_assistant"]), relative
        total += len(dropped)
        for i in dropped:
            (alert,) = [a for a in verdicts[i].alerts if a.action is Action.DROPPED]
            assert alert.kind == "delivery_mirror_duplicate"
            message = values[i]["message"]
            assert is_mirror(message)
            j = index[alert.related_entry_id]
            assert j < i
            assert verdicts[j].action is Action.KEPT
            original = values[j]["message"]
            assert original["role"] == "assistant"
            assert normalized_text(original) == normalized_text(message) != ""
    assert total > sum(int(r["mirror_equals_prev_assistant"]) for r in rows.values())


def test_corpus_detections_stay_within_what_the_manifest_counts(corpus_run):
    rows = manifest()
    totals = Counter()
    for relative, (_, _, verdicts) in corpus_run.items():
        kinds = Counter(a.kind for v in verdicts for a in v.alerts)
        row = rows[relative]
        assert kinds["dangling_parent"] <= int(row["dangling_parent_ids"]), relative
        assert kinds["orphaned_tool_call"] <= int(row["tool_calls_without_result"]), relative
        assert kinds["branch_fork"] <= int(row["forks"]), relative
        assert kinds["error_loop"] <= int(row["stop_reason_error_rows"]) // 3, relative
        assert kinds["cli_mirror_duplicate"] == int(row["api_cli_rows"]) == 0
        totals.update(kinds)
    assert totals["dangling_parent"] == sum(int(r["dangling_parent_ids"]) for r in rows.values())
