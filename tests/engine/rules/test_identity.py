"""The same entry delivered again (rules/identity): `redelivery`, `rewritten_in_place` and
`entry_id_conflict`, a record processed again from its source, and what a kept conflicting
version leaves; positives and near misses side by side."""

from __future__ import annotations

import json

import pytest

from stream.engine import (
    Action,
    Engine,
    FileOrigin,
    KafkaOrigin,
    Limits,
    Severity,
)
from stream.engine.text import (
    digest64,
)
from tests.support.builders import (
    alert_kinds,
    alerts,
    assert_clean_twice_is_clean,
    assistant,
    custom,
    drops,
    encode,
    header,
    kept,
    kept_ids,
    mirror,
    new_id,
    new_session,
    outputs,
    process,
    run,
    tool_result,
    user,
    zero_usage,
)
from tests.support.rule_tests import TEXT, check_drop, stamped_with_response


def _annotated(message_entry: dict, **facts) -> dict:
    """The row as OpenClaw 2026.8+ rewrites it in place (`rewriteTranscriptMessageAtAnchor`):
    its id, parent, time and message, with facts added under `__openclaw`."""
    again = json.loads(json.dumps(message_entry))
    again["message"].setdefault("__openclaw", {}).update(facts)
    return again


# --- `redelivery` ---------------------------------------------------------------------------------

def test_redelivery_drops_the_same_entry_seen_again():
    u, a = user(), assistant(TEXT)
    items = [header(), u, a, a]
    verdicts = run(items)
    assert kept_ids(verdicts) == ["s1", u["id"], a["id"]]
    check_drop(
        verdicts[3],
        kind="redelivery",
        severity=Severity.INFO,
        entry_id=a["id"],
        related=a["id"],
        line=4,
    )
    again = run(items)
    assert verdicts[3].alerts[0].id == again[3].alerts[0].id
    assert verdicts[3].alerts[0].as_json() == again[3].alerts[0].as_json()


def test_redelivery_of_a_user_message_starts_no_turn():
    u, a = user("what is the weather?"), assistant("Sunny all day in Lisbon, around 24 degrees.")
    m = mirror("Sunny all day in Lisbon, around 24 degrees.")
    # The redelivered user message is dropped: the mirror is still in the assistant's turn.
    verdicts = run([header(), u, a, u, m])
    assert drops(verdicts) == {
        u["id"]: ("redelivery", u["id"]),
        m["id"]: ("delivery_mirror_duplicate", a["id"]),
    }


def test_same_id_with_different_content_is_kept_with_an_entry_id_conflict():
    a = assistant(TEXT)
    other = assistant("A completely different answer about something else.", id=a["id"])
    verdicts = run([header(), user(), a, other])
    assert verdicts[3].action is Action.KEPT
    assert [json.loads(line)["id"] for line in outputs(verdicts)].count(a["id"]) == 2
    (conflict,) = alerts(verdicts, "entry_id_conflict")
    assert conflict.severity is Severity.WARNING
    assert conflict.action is Action.KEPT
    assert conflict.entry_id == a["id"]
    assert conflict.related_entry_id == a["id"]
    assert conflict.source.line == 4
    assert not drops(verdicts)


def test_a_row_rewritten_in_place_under_its_key_is_the_same_message():
    """2026.9.1+ annotates the admitted Codex prompt where it is; the store sources send the
    row again."""
    prompt = user(TEXT, idempotency_key="run-7:user")
    reply = assistant("Sure.")
    again = _annotated(prompt, mirrorIdentity="turn-3:prompt", mirrorOrigin="codex-app-server")
    verdicts = run([header(), prompt, reply, again])
    assert drops(verdicts) == {prompt["id"]: ("rewritten_in_place", prompt["id"])}
    assert not alerts(verdicts, "entry_id_conflict")
    assert_clean_twice_is_clean(verdicts)


@pytest.mark.parametrize("change", ["unkeyed", "other content"])
def test_a_row_with_its_id_and_other_words_is_no_rewrite_in_place(change):
    prompt = user(TEXT, idempotency_key=None if change == "unkeyed" else "run-7:user")
    again = _annotated(prompt, steerTargetRunId="run-8")
    if change == "other content":
        again["message"]["content"][0]["text"] = "Something else entirely."
    verdicts = run([header(), prompt, assistant("Sure."), again])
    assert not drops(verdicts)
    assert alerts(verdicts, "entry_id_conflict")


def test_reprocessing_the_same_file_lines_is_not_a_redelivery():
    """A restart re-reads lines already processed: same output, same alert ids."""
    u, a = user(), assistant(TEXT, thinking="let me check")
    items = [header(), u, a, mirror(TEXT), a, assistant("second reply with other words"), user()]
    lines = encode(items)
    engine, session = Engine(), new_session()
    first = process(engine, session, lines)
    second = process(engine, session, lines)
    assert [v.output for v in second] == [v.output for v in first]
    assert [v.action for v in second] == [v.action for v in first]
    assert [v.drop_rule for v in second] == [v.drop_rule for v in first]
    first_ids = {a.id for v in first for a in v.alerts}
    # Every drop is named again by the very same alert; nothing new is alerted.
    for before, after in zip(first, second, strict=True):
        if before.action is Action.DROPPED:
            assert [x.as_json() for x in after.alerts] == [x.as_json() for x in before.alerts]
    assert {a.id for v in second for a in v.alerts} <= first_ids
    assert "consecutive_assistant" in alert_kinds(first)


def test_restart_in_the_middle_resumes_without_calling_anything_a_redelivery():
    items = [header(), user(), assistant(TEXT), mirror(TEXT), user("next"), assistant("fine")]
    lines = encode(items)
    engine, session = Engine(), new_session()
    uninterrupted = process(Engine(), new_session(), lines)
    process(engine, session, lines[:4])
    # The worker crashed after line 4 but before committing lines 3-4: they come again.
    resumed = process(engine, session, lines[2:], first=3)
    assert [v.output for v in resumed] == [v.output for v in uninterrupted[2:]]
    assert [v.drop_rule for v in resumed] == [v.drop_rule for v in uninterrupted[2:]]


def test_the_same_entries_from_another_source_are_redeliveries():
    items = [header(), user(), assistant(TEXT)]
    lines = encode(items)
    engine, session = Engine(), new_session()
    process(engine, session, lines, path="a.jsonl")
    again = process(engine, session, lines, path="b.jsonl")
    assert [v.drop_rule for v in again[1:]] == ["redelivery", "redelivery"]


def test_kafka_offsets_replayed_after_a_crash_reproduce_the_verdicts():
    a = assistant(TEXT)
    lines = encode([header(), user(), a, mirror(TEXT), a])
    engine, session = Engine(), new_session()

    def consume(offsets):
        return [
            engine.process(session, lines[i], KafkaOrigin("sessions", 3, 100 + i)) for i in offsets
        ]

    first = consume(range(5))
    replayed = consume(range(2, 5))
    assert [v.drop_rule for v in first] == [
        None,
        None,
        None,
        "delivery_mirror_duplicate",
        "redelivery",
    ]
    assert [v.drop_rule for v in replayed] == [v.drop_rule for v in first[2:]]
    assert [x.id for v in replayed for x in v.alerts] == [x.id for v in first[2:] for x in v.alerts]
    # A copy at a new offset is a real redelivery.
    late = engine.process(session, lines[2], KafkaOrigin("sessions", 3, 200))
    assert late.drop_rule == "redelivery"
    assert late.alerts[0].source == KafkaOrigin("sessions", 3, 200)


# --- re-parenting --------------------------------------------------------------------------------

def test_child_of_a_redelivered_entry_keeps_its_parent():
    u = user("hi", parent=None)
    again = user("hi", parent=None, id=u["id"])
    child = assistant("Hello!", parent=u["id"])
    verdicts = run([header(), u, again, child])
    assert drops(verdicts) == {u["id"]: ("redelivery", u["id"])}
    assert kept(verdicts)[-1]["parentId"] == u["id"]


def test_a_copy_of_a_conflicting_version_is_a_redelivery():
    a = assistant(TEXT)
    other = assistant("Another version of the same entry id.", id=a["id"], parent=None)
    verdicts = run([header(), user(), a, other, other, a])
    assert [v.action for v in verdicts[2:]] == [
        Action.KEPT,
        Action.KEPT,
        Action.DROPPED,
        Action.DROPPED,
    ]
    assert [v.drop_rule for v in verdicts[4:]] == ["redelivery", "redelivery"]
    assert len(alerts(verdicts, "entry_id_conflict")) == 1
    lines = encode([header(), user(), a, other, other, a])
    engine, session = Engine(), new_session()
    first = process(engine, session, lines)
    assert [v.drop_rule for v in process(engine, session, lines)] == [v.drop_rule for v in first]


def test_a_kept_conflicting_user_version_opens_a_turn():
    a = assistant(TEXT)
    u = user("first question")
    u_again = user("a different question under a reused id", id=u["id"])
    verdicts = run([header(), u, a, u_again, mirror(TEXT)])
    assert not drops(verdicts)


@pytest.mark.xfail(
    strict=True,
    reason="known gap: `redelivery` compares the versions of a reused id as received, not as "
    "cleaned, and keeps a conflicting version without the echo rules (spec: 'keep it')",
)
@pytest.mark.parametrize("case", ["reparented-versions-collide", "version-of-a-dropped-entry"])
def test_cleaning_twice_with_reused_ids(case):
    a = assistant(TEXT)
    m = mirror(TEXT)
    if case == "reparented-versions-collide":
        # two versions of one id that differ only in a parent that cleaning collapses
        u = user("hi", parent=None)
        items = [
            header(),
            u,
            a,
            m,
            user("hi", id=u["id"], parent=a["id"]),
            u | {"parentId": m["id"]},
        ]
    else:
        # the first entry with the id was a dropped mirror; the second version, a receipt of
        # the reply, is kept
        receipt = assistant(TEXT, id=m["id"], parent=a["id"], usage=zero_usage())
        items = [header(), user(), a, m, receipt]
    once = outputs(run(items))
    assert not drops(run(once))


def test_a_redelivery_after_its_id_was_forgotten_is_kept_silently():
    first = assistant(TEXT, parent=None)
    filler = [custom(parent=None) for _ in range(5)]
    items = [header(), first, *filler, first]
    assert drops(run(items, limits=Limits(max_ids=100))) == {
        first["id"]: ("redelivery", first["id"])
    }
    forgetful = run(items, limits=Limits(max_ids=3))
    assert not drops(forgetful)
    assert not alerts(forgetful, "entry_id_conflict")


# --- #134705: openclawStreamFallback rows of one message: `redelivery`'s conflict, both kept -----

def test_134705_a_stream_fallback_row_and_its_message_share_an_id_and_both_are_kept():
    """#134705: a non-streaming channel's reply of text + tool calls comes as two rows with one
    message id, responseId and timestamp: the text alone with `openclawStreamFallback`, and the
    thinking and tool calls with the text stripped (OpenClaw's display projection splits one
    stored message so). Neither repeats the other: the text is only in the first."""
    narration = "Checking the deploy log first."
    message_id = new_id()
    question = user("deploy failed?")
    text_row = stamped_with_response(
        assistant(
            narration,
            id=message_id,
            parent=question["id"],
            openclawStreamFallback={
                "replacementText": narration,
                "source": "segment",
                "itemId": "commentary-0",
            },
            openclawDelivery={"textPhaseRequiresTerminal": True},
        ),
        1789200000000,
        "resp_77",
    )
    calls_row = stamped_with_response(
        assistant(
            thinking="Look at the log.",
            tool_calls=["call_1"],
            id=message_id,
            parent=question["id"],
            usage=text_row["message"]["usage"],
            openclawDelivery={"textPhaseRequiresTerminal": True},
        ),
        1789200000000,
        "resp_77",
    )
    empty_row = stamped_with_response(
        assistant(
            "",
            id=message_id,
            parent=question["id"],
            openclawStreamFallback={
                "replacementText": "",
                "source": "segment",
                "itemId": "commentary-1",
            },
        ),
        1789200000000,
        "resp_77",
    )
    verdicts = run(
        [header(), question, text_row, calls_row, empty_row, tool_result("call_1", "exit 0")]
    )
    assert not drops(verdicts)
    assert kept_ids(verdicts).count(message_id) == 3
    conflicts = alerts(verdicts, "entry_id_conflict")
    assert [a.entry_id for a in conflicts] == [message_id, message_id]
    assert all(a.severity is Severity.WARNING and a.action is Action.KEPT for a in conflicts)
    # the narration twice, in its text and its replacementText, and nowhere else
    assert sum(line.count(narration.encode()) for line in outputs(verdicts)) == 2


# --- where a record was read: a replay is the same source again -----------------------------------


def test_an_origin_digest_is_the_digest_of_the_origin_earlier_versions_stored():
    # 0.1 and 0.2 kept digest64 of these very strings in the session's state
    kafka = KafkaOrigin("session-events", 2, 7)
    assert kafka.origin_digest() == digest64(b"kafka:session-events/2")
    assert FileOrigin("a/s1.jsonl", 3).origin_digest() == digest64(b"file:a/s1.jsonl")
    path = b"caf\xe9.jsonl".decode("utf-8", "surrogateescape")
    assert FileOrigin(path, 1).origin_digest() == digest64(b"file:caf\xed\xb3\xa9.jsonl")


def test_partitions_and_topics_have_origins_of_their_own():
    digests = {KafkaOrigin(topic, partition, 0).origin_digest()
               for topic in ("in", "in-2") for partition in range(3)}
    assert len(digests) == 6


def test_a_replayed_record_is_known_after_the_cache_of_origins_was_emptied():
    text = "Moved it to Thursday."
    lines = encode([header(), user(), assistant(text), mirror(text)])
    engine, session = Engine(), new_session()
    first = [engine.process(session, raw, KafkaOrigin("in", 0, n)) for n, raw in enumerate(lines)]
    for n in range(5000):  # more origins than the cache keeps
        KafkaOrigin(f"other-{n}", 0, 0).origin_digest()
    again = [engine.process(session, raw, KafkaOrigin("in", 0, n)) for n, raw in enumerate(lines)]
    assert [v.action for v in first] == [Action.KEPT] * 3 + [Action.DROPPED]
    assert [(v.action, v.output, v.drop_rule) for v in again] == [
        (v.action, v.output, v.drop_rule) for v in first
    ]
    assert [a.id for v in again for a in v.alerts] == [a.id for v in first for a in v.alerts]
