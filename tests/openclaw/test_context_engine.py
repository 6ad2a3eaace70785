"""The context engine plugin in a real OpenClaw 2026.9.6: what the model is sent, with and without.

One scenario, driven once. A turn in two sessions per copy shape; then into each session a copy
of its reply (or its question) the way a buggy writer leaves one (write_copies.mjs, through
OpenClaw's own SDK), or a `gateway call send` of the reply (OpenClaw's delivery mirror, which
its own sanitizer already leaves out); `follow-sqlite`, the worker, and the verdict service over
what the store holds. Then the next turn of the first session of each pair on the gateway as
installed (the legacy engine), the plugin installed as docs/context-engine.md says, the gateway
restarted, and the next turn of the second session. The model stand-in recorded every request.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

import pytest

from stream.brokers import RunningBroker
from stream.settings import Settings
from tests.support.openclaw import shapes
from tests.support.openclaw.context_engine import (
    DEGRADED,
    FAILED,
    copies_sent,
    estimated_tokens,
    install,
    measure_assemble,
    percentile,
    request_for,
    system_prompt,
    texts,
    thinking_blocks,
    trace,
    write_copies,
)
from tests.support.openclaw.gateway import COMPLETIONS_MODEL_ID, COMPLETIONS_PROVIDER, Gateway
from tests.support.openclaw.model import ModelStandIn, Request
from tests.support.openclaw.pipeline import Outputs, publish, run_worker, settings_for
from tests.support.verdicts import VerdictService

pytestmark = [
    pytest.mark.openclaw,
    pytest.mark.integration,
    pytest.mark.parametrize("openclaw_release", ["2026.9.6"], indirect=True, scope="module"),
]

@dataclass(frozen=True)
class Shape:
    repeats: str  # "reply" or "question": the entry the copy repeats
    rule: str  # the rule session-stream drops the copy by
    openclaw: str  # what OpenClaw 2026.9.6 itself does with it before assemble()
    without: int  # times the model is sent the repeated text, without the plugin
    with_plugin: int  # and with it


SHAPES = {
    "cli-copy": Shape("reply", "cli_mirror_duplicate", "merges it into the reply", 2, 1),
    "mirror-real-provider": Shape("reply", "cleaned_child_duplicate",
                                  "merges it into the reply", 2, 1),
    "echo": Shape("reply", "mistagged_echo", "merges it into the reply", 2, 1),
    "keyed-replay": Shape("question", "idempotent_replay", "merges it into the question", 2, 1),
    # The last message, unanswered: OpenClaw folds it into the next turn's prompt (the pending
    # input, which the engine never touches) and moves the branch off it.
    "keyed-replay-trailing": Shape("question", "idempotent_replay",
                                   "folds it into the turn's prompt", 2, 2),
    "delivery-mirror": Shape("reply", "delivery_mirror_duplicate", "leaves it out", 1, 1),
}
WITHOUT, WITH = "without", "with"
LAG_SESSION = "ce-lag"
LONG_SESSION, LONG_TURNS = "ce-long", 200
# The keyed replay's sessions answer their next turn on the openai-completions model: no
# openclaw.cache-ttl entry follows that reply, so OpenClaw commits the turn (with the entry
# there, 2026.9.6 never calls commitTurn; docs/context-engine.md).
COMPLETIONS = f"{COMPLETIONS_PROVIDER}/{COMPLETIONS_MODEL_ID}"
TURN_MODEL = {"keyed-replay": COMPLETIONS}
AFTER_COMPACTION = "One more question, after the compaction."
DEADLINE_MS = 1000  # generous on a shared 2-core box; the latency is measured, not asserted
MEASURE_ROUNDS = 100


def session(shape: str, side: str) -> str:
    return f"ce-{shape}-{side}"


def shape_of(session_id: str) -> str:
    return session_id.removeprefix("ce-").rsplit("-", 1)[0]


def second_question(shape: str, side: str) -> str:
    return f"Second question about {shape}, {side} the plugin."


@dataclass
class EngineRun:
    gateway: Gateway
    settings: Settings
    outputs: Outputs
    copies: dict[str, str]  # session -> the copy's entry id
    copied: dict[str, dict[str, Any]]  # session -> the entry the copy repeats
    requests: list[Request]
    trace: list[dict[str, Any]]
    log_with_plugin: str  # what the gateway wrote after its start with the plugin
    rows: dict[str, list[bytes]]
    config: dict[str, Any]
    measured: dict[str, Any]
    outbox: list[tuple]
    compacted: dict[str, Any]  # what `openclaw sessions compact` answered

    def request(self, shape: str, side: str) -> Request:
        return request_for(self.requests, second_question(shape, side))

    def entries(self, session_id: str) -> list[dict]:
        return shapes.parsed(self.rows[session_id])


def copied_text(entry: dict) -> str:
    return shapes.text(entry)


def plant_copies(gateway: Gateway) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Each shape's copy written into its sessions: the copy's id and the entry it copies."""
    copied: dict[str, dict[str, Any]] = {}
    copies: dict[str, str] = {}
    for side in (WITHOUT, WITH):  # the delivery mirror: OpenClaw writes it for the send
        session_id = session("delivery-mirror", side)
        reply = shapes.replies(shapes.parsed(gateway.transcripts()[session_id]))[-1]
        key = f"mirror-{side}"
        gateway.send(shapes.text(reply), session_key=gateway.session_key(session_id),
                     idempotency_key=key)
        mirror = gateway.wait_for_entry(session_id, lambda e, k=key: shapes.idempotency_key(e)
                                        == k, f"the delivery mirror of {session_id}")
        copies[session_id], copied[session_id] = mirror["id"], reply
    plan = [{"session": session(shape, side), "shape": shape}
            for shape in SHAPES if shape != "delivery-mirror" for side in (WITHOUT, WITH)]
    plan.append({"session": LONG_SESSION, "shape": "long", "turns": LONG_TURNS})
    written = write_copies(gateway, plan)
    stored = {s: {e["id"]: e for e in shapes.parsed(rows)} for s, rows in
              gateway.transcripts().items()}
    for one in written:
        session_id = one["session"]
        if one["shape"] == "keyed-question":
            copied[session_id] = stored[session_id][one["entryId"]]
        elif session_id != LONG_SESSION:
            copies[session_id] = one["entryId"]
    for session_id in copies:
        entries = list(stored[session_id].values())
        if shape_of(session_id) == "keyed-replay-trailing":
            copied[session_id] = next(e for e in entries if shapes.role(e) == "user")
        copied.setdefault(session_id, shapes.replies(entries)[0])
    return copies, copied


@pytest.fixture(scope="module")
def engine_run(openclaw_gateway: Gateway, model_stand_in: ModelStandIn, broker: RunningBroker,
               tmp_path_factory: pytest.TempPathFactory) -> EngineRun:
    gateway = openclaw_gateway
    work = tmp_path_factory.mktemp("context-engine")
    settings = settings_for(broker, "oc-ce", work)

    for shape in SHAPES:
        for side in (WITHOUT, WITH):
            gateway.run_turn(session(shape, side), f"First question about {shape}, {side}.")
    gateway.run_turn(LAG_SESSION, "First question about a copy not processed yet.")
    gateway.run_turn(LONG_SESSION, "The first of many questions.")  # its key, for the compaction
    copies, copied = plant_copies(gateway)

    publish("follow-sqlite", gateway.store_path, settings, work / "follow-sqlite.checkpoint")
    rows = gateway.transcripts()
    outputs = run_worker(settings, work / "worker.log", sum(map(len, rows.values())))
    write_copies(gateway, [{"session": LAG_SESSION, "shape": "cli-copy"}])  # never published

    for shape in SHAPES:
        gateway.run_turn(session(shape, WITHOUT), second_question(shape, WITHOUT),
                         model=TURN_MODEL.get(shape))

    service = VerdictService(settings, work / "secrets" / "verdicts.token",
                             work / "verdicts.log")
    config = {"serviceUrl": service.url, "tokenFile": str(service.token_file),
              "stateDir": str(work / "engine-state"), "traceFile": str(work / "trace.jsonl"),
              "deadlineMs": DEADLINE_MS}
    gateway.stop()
    install(gateway, config)
    # The stand-in's one-line summary has none of the sections OpenClaw's compaction quality
    # guard asks for (## Decisions, ## Open TODOs, ...): without the guard, OpenClaw keeps it.
    # The last 2,000 tokens of the long session stay after the summary, cli copies among them.
    openclaw = json.loads(gateway.config_path.read_text())
    openclaw["agents"]["defaults"]["compaction"] = {"qualityGuard": {"enabled": False},
                                                    "keepRecentTokens": 2000}
    gateway.config_path.write_text(json.dumps(openclaw, indent=2))
    service.start()
    try:
        # in a process of its own, over the sessions as the pipeline processed them
        measured = measure_assemble(
            gateway, {**config, "deadlineMs": 50, "traceFile": str(work / "measured.jsonl")},
            [session(shape, WITH) for shape in SHAPES] + [LONG_SESSION], MEASURE_ROUNDS)
        gateway.start()
        for shape in SHAPES:
            gateway.run_turn(session(shape, WITH), second_question(shape, WITH),
                             model=TURN_MODEL.get(shape))
        gateway.run_turn(LAG_SESSION, "Second question about a copy not processed yet.")
        # OpenClaw's own compaction of the long session, through the engine, then a turn on what
        # it kept: the summary, and the messages from its first kept entry on
        compacted = gateway.cli_json("sessions", "compact", gateway.session_key(LONG_SESSION),
                                     "--json", "--url", gateway.url, "--token", gateway.token)
        gateway.run_turn(LONG_SESSION, AFTER_COMPACTION)
        log_with_plugin = gateway.own_log()
    finally:
        service.stop()
    (work / "model-requests.json").write_text(json.dumps(
        [{"prompt": r.prompt, "body": r.body} for r in model_stand_in.requests], indent=1))
    with sqlite3.connect(f"file:{gateway.store_path}?mode=ro", uri=True) as db:
        outbox = db.execute("SELECT session_id, json_extract(payload_json, '$.state') FROM "
                            "context_engine_turn_outbox WHERE engine_id = ?",
                            ("session-stream",)).fetchall()
    return EngineRun(gateway, settings, outputs, copies, copied, list(model_stand_in.requests),
                     trace(work / "trace.jsonl"), log_with_plugin, gateway.transcripts(),
                     config, measured, outbox, compacted)


def test_session_stream_drops_each_copy_written(engine_run: EngineRun) -> None:
    drops = {a["entry_id"]: (a["kind"], a["related_entry_id"]) for a in engine_run.outputs.drops()}
    for session_id, copy_id in engine_run.copies.items():
        expected = (SHAPES[shape_of(session_id)].rule, engine_run.copied[session_id]["id"])
        assert drops.get(copy_id) == expected, session_id
    long_copies = [e["id"] for e in engine_run.entries(LONG_SESSION) if shapes.is_cli_copy(e)]
    assert len(long_copies) == LONG_TURNS // 10
    assert all(drops[copy_id][0] == "cli_mirror_duplicate" for copy_id in long_copies)


def sent(engine_run: EngineRun, shape: str, side: str) -> int:
    """Times the model was sent the text the copy repeats, in the turn after the copy."""
    spec = SHAPES[shape]
    entry = engine_run.copied[session(shape, side)]
    role = "user" if spec.repeats == "question" else "assistant"
    return copies_sent(engine_run.request(shape, side), role, shapes.text(entry))


def report(engine_run: EngineRun) -> str:
    rows = ["| copy | OpenClaw 2026.9.6 | sent without / with the plugin | est. input tokens "
            "without / with |", "|---|---|---|---|"]
    for shape, spec in SHAPES.items():
        tokens = [estimated_tokens(engine_run.request(shape, side)) for side in (WITHOUT, WITH)]
        rows.append(f"| {shape} | {spec.openclaw} | {sent(engine_run, shape, WITHOUT)} / "
                    f"{sent(engine_run, shape, WITH)} | {tokens[0]} / {tokens[1]} |")
    return "\n".join(rows)


def test_without_the_plugin_the_model_is_sent_the_copies_openclaw_misses(
    engine_run: EngineRun,
) -> None:
    print(f"\n{report(engine_run)}")
    assert {shape: sent(engine_run, shape, WITHOUT) for shape in SHAPES} == {
        shape: spec.without for shape, spec in SHAPES.items()}


def test_with_the_plugin_the_model_is_sent_each_message_once(engine_run: EngineRun) -> None:
    assert {shape: sent(engine_run, shape, WITH) for shape in SHAPES} == {
        shape: spec.with_plugin for shape, spec in SHAPES.items()}


def test_nothing_but_the_copies_changes_in_what_the_model_is_sent(engine_run: EngineRun) -> None:
    for shape, spec in SHAPES.items():
        seen = {}
        for side in (WITHOUT, WITH):
            request = engine_run.request(shape, side)
            copy = shapes.text(engine_run.copied[session(shape, side)])
            kept = {role: [_same_in_both(t, side) for t in texts(request, role)]
                    for role in ("user", "assistant")}
            if side == WITHOUT and spec.without > spec.with_plugin:
                role = "user" if spec.repeats == "question" else "assistant"
                kept[role] = _without_last(kept[role], _same_in_both(copy, side))
            seen[side] = (kept, len(thinking_blocks(request)))
        assert seen[WITHOUT] == seen[WITH], shape


def _same_in_both(text: str, side: str) -> str:
    """A text as it reads in either session of a pair: the stand-in's replies name the request's
    number, the questions and OpenClaw's runtime line the side."""
    words = ("N" if word.rstrip(",").isdigit() else word for word in text.split())
    text = re.sub(rf", {side}( the plugin)?\.", ", SIDE.", " ".join(words))
    return re.sub(rf"\b(ce-[a-z-]+)-{side}\b", r"\1-SIDE", text)


def _without_last(texts_: list[str], text: str) -> list[str]:
    """`texts_` less the last one that is `text`."""
    for index in range(len(texts_) - 1, -1, -1):
        if texts_[index] == text:
            return texts_[:index] + texts_[index + 1:]
    return texts_


def test_the_system_prompt_holds_the_same_lines_with_the_plugin(engine_run: EngineRun) -> None:
    # OpenClaw leaves its memory guidance out of a non-legacy engine's system prompt; the engine
    # hands it back (buildMemorySystemPromptAddition), which OpenClaw puts after its cache
    # boundary instead of in place.
    for shape in SHAPES:
        lines = {side: sorted(_same_in_both(line, side) for line in system_prompt(
            engine_run.request(shape, side)).splitlines() if line.strip())
            for side in (WITHOUT, WITH)}
        assert lines[WITHOUT] == lines[WITH], shape
        assert "## Memory Recall" in lines[WITH]


def test_the_latest_replys_thinking_reaches_the_model_as_stored(engine_run: EngineRun) -> None:
    for shape in ("cli-copy", "mirror-real-provider", "echo", "delivery-mirror"):
        reply = engine_run.copied[session(shape, WITH)]
        stored = [b for b in reply["message"]["content"] if b["type"] == "thinking"]
        sent_blocks = thinking_blocks(engine_run.request(shape, WITH))
        assert [(b["thinking"], b["signature"]) for b in sent_blocks] == [
            (b["thinking"], b["thinkingSignature"]) for b in stored], shape


def test_a_normal_user_turn_runs_through_the_engine(engine_run: EngineRun) -> None:
    assembled = {t["sessionId"]: t for t in engine_run.trace if t["event"] == "assemble"}
    for shape, spec in SHAPES.items():
        record = assembled[session(shape, WITH)]
        assert record["selection"] == {"selectedId": "session-stream", "source": "configured"}
        assert (record["executionHost"], record["mode"]) == ("openclaw-embedded", "normal")
        removes = spec.with_plugin < spec.without
        assert record["outcome"] == ("removed" if removes else "nothing"), shape
    assert not DEGRADED.search(engine_run.log_with_plugin)
    assert not FAILED.search(engine_run.log_with_plugin)
    # the turn answered on the completions model is committed, keyed as OpenClaw admitted it
    replay_session = session("keyed-replay", WITH)
    (commit,) = [t for t in engine_run.trace
                 if t["event"] == "commitTurn" and t["sessionId"] == replay_session]
    entries = {e["id"]: e for e in engine_run.entries(replay_session)}
    admitted = entries[commit["admissionEntryId"]]
    assert shapes.text(admitted) == second_question("keyed-replay", WITH)
    assert shapes.idempotency_key(admitted).endswith(":user")
    assert entries[commit["terminalEntryId"]]["parentId"] == admitted["id"]
    assert commit["status"] == "committed"
    # OpenClaw's outbox holds nothing of it; of the turns answered on the anthropic-messages
    # model, whose openclaw.cache-ttl entry keeps OpenClaw from calling commitTurn, only the
    # admission, which the session's next turn discards (docs/context-engine.md)
    assert {state for session_id, state in engine_run.outbox
            if session_id != replay_session} == {"admitted"}
    assert replay_session not in {session_id for session_id, _ in engine_run.outbox}


def test_compaction_stays_openclaws_and_the_copies_it_kept_are_left_out(
    engine_run: EngineRun,
) -> None:
    assert (engine_run.compacted["ok"], engine_run.compacted["compacted"]) == (True, True)
    (compact,) = [t for t in engine_run.trace if t["event"] == "compact"]
    # delegated to OpenClaw's own compaction, which keeps the session's id
    assert (compact["sessionId"], compact["ok"], compact["compacted"]) == (
        LONG_SESSION, True, True)
    assert compact["successor"] in (None, LONG_SESSION)
    entries = [e for e in engine_run.entries(LONG_SESSION) if e["type"] == "message"]
    (compaction,) = [e for e in engine_run.entries(LONG_SESSION) if e["type"] == "compaction"]
    kept = [e["id"] for e in entries]
    kept = kept[kept.index(compaction["firstKeptEntryId"]):]
    # the copies OpenClaw kept after the summary, each with its reply: the ones the engine removes
    expected = [e["id"] for i, e in enumerate(entries) if shapes.is_cli_copy(e) and e["id"] in kept
                and entries[i - 1]["id"] in kept]
    (after,) = [t for t in engine_run.trace if t["event"] == "assemble"
                and t["sessionId"] == LONG_SESSION]
    assert after["selection"]["selectedId"] == "session-stream"
    assert [r["entryId"] for r in after["removed"]] == expected
    assert expected, "no copy after the summary: the compaction kept too little to tell"
    print(f"\ncompaction kept {len(kept)} of {len(entries)} messages; the engine left out "
          f"{len(expected)} copies after the summary")
    assert request_for(engine_run.requests, AFTER_COMPACTION).body["messages"]


def test_verdicts_that_lag_leave_the_messages_unchanged_with_one_line(
    engine_run: EngineRun,
) -> None:
    request = request_for(engine_run.requests, "Second question about a copy not processed yet.")
    reply = shapes.replies(engine_run.entries(LAG_SESSION))[0]
    assert copies_sent(request, "assistant", shapes.text(reply)) == 2
    lines = [line for line in engine_run.log_with_plugin.splitlines()
             if f"session {LAG_SESSION}:" in line]
    assert len(lines) == 1
    assert "messages unchanged: verdicts lag the transcript" in lines[0]


def test_the_plugin_adds_little_to_a_turn(engine_run: EngineRun) -> None:
    assembled = [t for t in engine_run.trace if t["event"] == "assemble"]
    turns = [t["elapsedMs"] for t in assembled]
    measured = engine_run.measured
    print(f"\nassemble in the gateway's turns: n={len(turns)}, p50 "
          f"{percentile(turns, 0.5):.1f} ms, p99 {percentile(turns, 0.99):.1f} ms: "
          + ", ".join(f"{t['sessionId']} {t['elapsedMs']:.1f} (read {t.get('readMs', 0):.1f}, "
                      f"ask {t.get('askMs', 0):.1f})" for t in assembled))
    print(f"assemble measured ({MEASURE_ROUNDS} rounds): {json.dumps(measured['warm'])}")
    print(json.dumps(measured["sessions"], indent=1))
    # the measurement ran against the same verdicts: each copy the plugin removes left out
    for shape, spec in SHAPES.items():
        numbers = measured["sessions"][session(shape, WITH)]
        assert numbers["sent"] == numbers["blocks"] - (spec.without - spec.with_plugin), shape
    long = measured["sessions"][LONG_SESSION]
    assert long["entries"] == 2 + 2 * LONG_TURNS + LONG_TURNS // 10
    assert long["sent"] == long["blocks"] - LONG_TURNS // 10
    assert measured["warm"]["n"] == MEASURE_ROUNDS * (len(SHAPES) + 1)
