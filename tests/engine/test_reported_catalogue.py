"""The catalogue of duplicate shapes OpenClaw users reported: one session per thread as the thread
and OpenClaw's code show it (`copy.jsonl`), and its near miss (`near.jsonl`), in
tests/data/reported/<thread>/ (its README says how they were made).

Each file's `expect.json` entry says what the engine does with it, and these tests hold it there:

* `drop`: exactly these entries are dropped, each by the rule named, each alert naming the entry
  it copies (`repeats`); nothing else is dropped. A near miss drops nothing.
* every kept entry leaves byte for byte, but one whose parent (or a `leaf`'s target) was dropped
  and now names the entry that stood in for it; the cleaned session is a tree, every `parentId`
  naming an entry it kept before;
* `alerts`: reports the engine raises on kept entries (an `identity_conflict`, a
  `retried_prompt`, ...), each with the entry it names;
* `kept_by_design`: the thread's copies the engine keeps on purpose, and why (no identity, only
  the words: a person can type them twice); `reported_copies` names them;
* `known_gap`: a copy carrying an identity the engine does not read yet; `missed` names it, and
  the test holds today's behaviour (kept) until the engine reads it.

Threads whose reported double is a genuine second message (status `reported …, kept`) are
inverted: `copy.jsonl` is the near miss and must be kept whole, `near.jsonl` the droppable
contrast. docs/reported-shapes.md lists every thread with its outcome ("The catalogue").
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

from stream.commands.clean import clean_session
from stream.engine import Action, Engine
from tests.support.data import REPORTED

ROOT = Path(__file__).resolve().parents[2]
SHAPES_DOC = ROOT / "docs" / "reported-shapes.md"
FILES = ("copy.jsonl", "near.jsonl")
# the fields the engine rewrites on a kept entry whose link named a dropped entry
LINKS = ("parentId", "targetId", "appendParentId")


def threads() -> list[int]:
    return sorted(int(path.name) for path in REPORTED.iterdir()
                  if path.is_dir() and path.name.isdigit())


@cache
def expected(thread: int) -> dict:
    return json.loads((REPORTED / str(thread) / "expect.json").read_text())


def inverted(thread: int) -> bool:
    """The reported double is a genuine second message: the reported file is the near miss."""
    return expected(thread)["status"].startswith("reported")


def near_miss(thread: int) -> str:
    return "copy.jsonl" if inverted(thread) else "near.jsonl"


CASES = [pytest.param(thread, name, id=f"#{thread}" + ("-near" if name == "near.jsonl" else ""))
         for thread in threads() for name in FILES]


def clean(thread: int, name: str):
    raw = (REPORTED / str(thread) / name).read_bytes().splitlines()
    session_id = json.loads(raw[0])["id"]
    verdicts = list(clean_session(Engine(), session_id, name, list(enumerate(raw, 1))))
    return raw, verdicts


@pytest.mark.parametrize(("thread", "name"), CASES)
def test_each_reported_shape_comes_out_as_its_case_says(thread, name):
    want = expected(thread)[name]
    raw, verdicts = clean(thread, name)
    assert len(verdicts) == len(raw)

    dropped = {}
    for verdict in verdicts:
        if verdict.action is Action.DROPPED:
            [alert] = [a for a in verdict.alerts if a.action.value == "dropped"]
            dropped[alert.entry_id] = (alert.kind, alert.related_entry_id)
    assert dropped == {entry_id: (copy["rule"], copy["repeats"])
                       for entry_id, copy in want["drop"].items()}
    if name == near_miss(thread):
        assert dropped == {}, "a near miss lost an entry"

    kept_alerts = [[a.kind, a.entry_id, a.related_entry_id]
                   for verdict in verdicts for a in verdict.alerts if a.action.value == "kept"]
    for alert in want.get("alerts", []):
        assert alert in kept_alerts

    output_ids: list[str] = []
    kept_ids = set()
    for line, verdict in zip(raw, verdicts, strict=True):
        value = json.loads(line)
        if verdict.action is Action.DROPPED:
            continue
        assert verdict.action is Action.KEPT, value.get("id")
        out = json.loads(verdict.output)
        if verdict.output != line:  # only a link that named a dropped entry may change
            changed = {key for key in value.keys() | out.keys() if value.get(key) != out.get(key)}
            assert changed <= set(LINKS), (value.get("id"), changed)
            assert all(value.get(key) in dropped for key in changed), (value.get("id"), changed)
        for key in LINKS:  # the cleaned session is a tree: each link names an entry kept before
            target = out.get(key)
            assert target is None or target in output_ids, (out.get("id"), key, target)
        if value.get("type") != "session":
            output_ids.append(out["id"])
            kept_ids.add(out["id"])
    assert set(want["keep"]) <= kept_ids
    assert kept_ids.isdisjoint(want["drop"])


@pytest.mark.parametrize(("thread", "name"), CASES)
def test_a_copy_kept_says_why(thread, name):
    """A reported copy the engine keeps is either kept by design (no identity: only the words)
    or a known gap (an identity the engine does not read yet), with the reason in the case."""
    want = expected(thread)[name]
    for reason, copies in (("kept_by_design", "reported_copies"), ("known_gap", "missed")):
        assert (reason in want) == (copies in want), (reason, copies)
        if reason in want:
            assert len(want[reason]) > 40
            assert want[copies]
            for entry_id, copy in want[copies].items():
                assert entry_id in want["keep"] and copy["repeats"] in want["labels"]


def test_every_case_folder_is_whole_and_tested():
    tested = {param.values[0] for param in CASES}
    folders = [path for path in REPORTED.iterdir() if path.is_dir()]
    assert {int(path.name) for path in folders} == tested
    for folder in folders:
        assert sorted(p.name for p in folder.iterdir()) == [
            "copy.jsonl", "expect.json", "near.jsonl", "notes.md"], folder.name
        want = expected(int(folder.name))
        assert want["thread"] == int(folder.name)
        assert re.fullmatch(rf"https://github\.com/openclaw/openclaw/(issues|pull)/{folder.name}",
                            want["url"])
        for name in FILES:
            ids = {json.loads(line).get("id") for line in
                   (folder / name).read_text().splitlines()[1:]}
            assert set(want[name]["labels"]) == ids, (folder.name, name)
            assert set(want[name]["keep"]) | set(want[name]["drop"]) == ids, (folder.name, name)


# --- docs/reported-shapes.md ------------------------------------------------------------------

CATALOGUE_ROW = re.compile(
    r"^\| \[#(\d+)\]\((https://github\.com/openclaw/openclaw/(?:issues|pull)/\d+)\) \|"
    r"(.*)\| \[`(#\d+)`\]\(\.\./tests/data/reported/(\d+)/\) \| (.*) \|$")


def catalogue_rows() -> dict[int, tuple[str, str, str]]:
    text = SHAPES_DOC.read_text()
    section = text.split("\n## The catalogue\n", 1)[1]
    rows = {}
    for line in section.splitlines():
        found = CATALOGUE_ROW.match(line)
        if found:
            thread, url, _, test_id, folder, outcome = found.groups()
            assert int(folder) == int(thread) and test_id == f"#{thread}"
            assert int(thread) not in rows, thread
            rows[int(thread)] = (url, outcome, line)
    return rows


def outcome(thread: int) -> str:
    """The outcome column a thread's case data gives: the rules that drop its copies, or why
    they are kept."""
    copy = expected(thread)["copy.jsonl"]
    near = expected(thread)["near.jsonl"]
    if inverted(thread):
        rules = sorted({c["rule"] for c in near["drop"].values()})
        return "kept (a genuine second message)" + (
            "; the copy beside it: " + ", ".join(f"`{r}`" for r in rules) if rules else "")
    parts = []
    rules = sorted({c["rule"] for c in copy["drop"].values()})
    if rules:
        parts.append("dropped: " + ", ".join(f"`{r}`" for r in rules))
    if "kept_by_design" in copy:
        parts.append("kept by design")
    if "known_gap" in copy:
        parts.append("known gap")
    if not rules and "kept_by_design" not in copy and "known_gap" not in copy:
        parts.append("kept")
    return "; ".join(parts)


def test_the_catalogue_in_the_docs_has_a_row_per_case_folder():
    rows = catalogue_rows()
    assert sorted(rows) == threads()
    for thread, (url, given, line) in rows.items():
        assert url == expected(thread)["url"], thread
        assert given.startswith(outcome(thread)), (thread, given, outcome(thread))
        for alert in expected(thread)["copy.jsonl"].get("alerts", []):
            assert f"`{alert[0]}`" in line, (thread, alert[0])


def test_every_thread_the_docs_name_has_a_case():
    """The table of reported shapes above the catalogue names threads by number: each has a
    case folder."""
    table = SHAPES_DOC.read_text().split("\n## The catalogue\n", 1)[0]
    named = {int(n) for n in re.findall(r"#(\d{4,6})\b", table)}
    assert named
    assert named <= set(threads()), sorted(named - set(threads()))
