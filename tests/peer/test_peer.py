"""The peer suite: OpenClaw's own tests that decide whether a transcript entry is a duplicate,
ported as session files (cases/<suite>/<case>.jsonl) with what must be kept and dropped
(<case>.expect.json), run through the engine as `session-stream clean` runs a file.

The expectations are what is right, not what the engine does today: docs/openclaw-tests.md lists
where we deliberately differ from OpenClaw, and a failing case is a finding.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from stream.commands.clean import clean_session
from stream.engine import Action, Engine
from stream.engine.engine import DROP_RULES
from stream.sources.session_files import open_lines, session_id_of

CASES = Path(__file__).resolve().parent / "cases"

# The seven OpenClaw test files the suite ports (source 6 spans two files), by path in
# openclaw/openclaw.
SOURCES = {
    1: ("src/hooks/bundled/session-memory/transcript.test.ts",),
    2: ("src/config/sessions/transcript.test.ts",),
    3: ("src/agents/command/attempt-execution.cli.test.ts",),
    4: ("extensions/codex/src/app-server/transcript-mirror.test.ts",),
    5: ("src/agents/embedded-agent-runner/replay-history.test.ts",),
    6: (
        "src/gateway/server-methods/server-methods.test.ts",
        "src/gateway/chat-display-projection.media.test.ts",
    ),
    7: ("src/agents/tools/sessions-list-tool.test.ts",),
}
SOURCE_OF_PATH = {path: number for number, paths in SOURCES.items() for path in paths}

REQUIRED = {"source", "commit", "test", "peer", "kept", "dropped", "disagreement"}
OPTIONAL = {"read_from", "dead_lettered"}
COMMIT = re.compile(r"^[0-9a-f]{40}$")
REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class PeerCase:
    suite: str
    name: str
    session: Path
    expect_path: Path

    @property
    def id(self) -> str:
        return f"{self.suite}/{self.name}"

    def expect(self) -> dict:
        return json.loads(self.expect_path.read_text())


def discover() -> list[PeerCase]:
    return [
        PeerCase(
            session.parent.name,
            session.name.removesuffix(".jsonl"),
            session,
            session.with_name(session.name.removesuffix(".jsonl") + ".expect.json"),
        )
        for session in sorted(CASES.glob("*/*.jsonl"))
    ]


ALL_CASES = discover()


def validation_errors(expect: object) -> list[str]:
    """Everything wrong with one .expect.json, empty when it is well formed."""
    if not isinstance(expect, dict):
        return ["not a JSON object"]
    errors = []
    missing, unknown = REQUIRED - expect.keys(), expect.keys() - REQUIRED - OPTIONAL
    if missing:
        errors.append(f"missing fields {sorted(missing)}")
    if unknown:
        errors.append(f"unknown fields {sorted(unknown)}")
    if expect.get("source") not in SOURCE_OF_PATH:
        errors.append(f"source {expect.get('source')!r} is none of the seven peer test files")
    if not isinstance(expect.get("commit"), str) or not COMMIT.match(expect["commit"]):
        errors.append("commit is not a 40-digit lowercase hex sha")
    if "read_from" in expect and not (
        isinstance(expect["read_from"], str) and REPO.match(expect["read_from"])
    ):
        errors.append("read_from is not an owner/name repository")
    for field in ("test", "peer"):
        if not isinstance(expect.get(field), str) or not expect[field].strip():
            errors.append(f"{field} is not a non-empty string")
    if isinstance(expect.get("test"), str) and " > " not in expect["test"]:
        errors.append("test is not '<describe> > <it title>'")
    kept = expect.get("kept")
    if not isinstance(kept, list) or not all(isinstance(i, str) and i for i in kept):
        errors.append("kept is not a list of entry ids")
    dropped = expect.get("dropped")
    if not isinstance(dropped, dict):
        errors.append("dropped is not an object of entry id -> rule")
    else:
        for entry_id, rule in dropped.items():
            if rule is not None and rule not in DROP_RULES:
                errors.append(f"dropped[{entry_id!r}] names no drop rule: {rule!r}")
    disagreement = expect.get("disagreement")
    if disagreement is not None and not (isinstance(disagreement, str) and disagreement.strip()):
        errors.append("disagreement is neither null nor a non-empty string")
    dead = expect.get("dead_lettered", 0)
    if not isinstance(dead, int) or isinstance(dead, bool) or dead < 0:
        errors.append("dead_lettered is not a non-negative integer")
    return errors


def run_case(case: PeerCase):
    """(header verdicts, [(entry id, verdict)] of every other parsed line, dead-letter count)."""
    lines = list(open_lines(case.session))
    session_id = session_id_of(case.session, lines[0][1] if lines else None)
    engine = Engine()
    headers, entries, dead = [], [], 0
    for (_, raw), verdict in zip(
        lines, clean_session(engine, session_id, str(case.session), lines), strict=True
    ):
        if verdict.action is Action.DEAD_LETTERED:
            dead += 1
            continue
        value = json.loads(raw)
        if value.get("type") == "session":
            headers.append(verdict)
        else:
            entries.append((value["id"], verdict))
    return headers, entries, dead


@pytest.mark.parametrize("case", ALL_CASES, ids=[case.id for case in ALL_CASES])
def test_peer_case(case: PeerCase):
    expect = case.expect()
    errors = validation_errors(expect)
    assert not errors, f"{case.expect_path.name}: " + "; ".join(errors)

    headers, entries, dead = run_case(case)
    assert headers and all(v.action is Action.KEPT for v in headers), "the header is not kept"
    assert dead == expect.get("dead_lettered", 0), "dead-lettered lines differ"

    in_file = {entry_id for entry_id, _ in entries}
    named = set(expect["kept"]) | set(expect["dropped"])
    assert in_file == named, (
        f"ids in the file but not in the expectation: {sorted(in_file - named)}; "
        f"ids expected but not in the file: {sorted(named - in_file)}"
    )

    kept = [entry_id for entry_id, v in entries if v.action is Action.KEPT]
    dropped = {entry_id: v.drop_rule for entry_id, v in entries if v.action is Action.DROPPED}
    wrongly_dropped = {i: dropped[i] for i in expect["kept"] if i in dropped and i not in kept}
    wrongly_kept = sorted(i for i in expect["dropped"] if i not in dropped)
    wrong_rule = {
        i: {"expected": rule, "got": dropped[i]}
        for i, rule in expect["dropped"].items()
        if rule is not None and i in dropped and dropped[i] != rule
    }
    report = (
        f"\npeer: {expect['peer']}\n"
        f"dropped but expected kept: {wrongly_dropped}\n"
        f"kept but expected dropped: {wrongly_kept}\n"
        f"dropped by another rule: {wrong_rule}"
    )
    assert kept == expect["kept"], "kept entries differ" + report
    assert set(dropped) == set(expect["dropped"]), "dropped entries differ" + report
    assert not wrong_rule, "drop rules differ" + report


def test_every_case_has_both_files():
    sessions = {p.name.removesuffix(".jsonl") for p in CASES.glob("*/*.jsonl")}
    expects = {p.name.removesuffix(".expect.json") for p in CASES.glob("*/*.expect.json")}
    assert sessions == expects
    assert not [
        p
        for p in CASES.rglob("*")
        if p.is_file() and not p.name.endswith((".jsonl", ".expect.json"))
    ]


def test_the_suite_ports_all_seven_sources():
    covered = {SOURCE_OF_PATH.get(case.expect()["source"]) for case in ALL_CASES}
    assert covered >= set(SOURCES), f"no case from sources {sorted(set(SOURCES) - covered)}"


def test_validation_rejects_malformed_expectations():
    good = ALL_CASES[0].expect()
    assert validation_errors(good) == []
    broken = {**good, "commit": "abc", "dropped": {"x": "no_such_rule"}, "extra": 1}
    del broken["peer"]
    errors = " ".join(validation_errors(broken))
    for fragment in (
        "missing fields ['peer']",
        "unknown fields ['extra']",
        "commit",
        "names no drop rule",
    ):
        assert fragment in errors
