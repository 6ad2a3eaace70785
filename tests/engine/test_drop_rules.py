"""Drop rules 1-6: when each fires, the alert it raises, and the near misses it must keep."""

from __future__ import annotations

import json

import pytest

from stream.engine import Action, Engine, FileSource, KafkaSource, Limits, Severity
from tests.support.builders import (
    alert_kinds,
    alerts,
    assert_clean_twice_is_clean,
    assert_valid_tree,
    assistant,
    custom,
    drops,
    encode,
    entry,
    header,
    kept,
    kept_ids,
    mirror,
    new_session,
    outputs,
    process,
    run,
    tool_result,
    user,
    zero_usage,
)

TEXT = "Done. The report is in ~/reports/weekly.md and I emailed it to the team."


def only_drop_alert(verdict):
    assert verdict.action is Action.DROPPED
    (alert,) = verdict.alerts
    assert alert.action is Action.DROPPED
    assert alert.kind == verdict.drop_rule
    return alert


def check_drop(verdict, *, kind, severity, entry_id, related, line, session_id="s1"):
    alert = only_drop_alert(verdict)
    assert alert.kind == kind
    assert alert.severity is severity
    assert alert.entry_id == entry_id
    assert alert.related_entry_id == related
    assert alert.session_id == session_id
    assert alert.source == FileSource(f"{session_id}.jsonl", line)
    assert verdict.output is None
    assert verdict.dead_letter is None
    return alert


# --- rule 1: redelivery -------------------------------------------------------------------------


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


def _annotated(message_entry: dict, **facts) -> dict:
    """The row as OpenClaw 2026.8+ rewrites it in place (`rewriteTranscriptMessageAtAnchor`):
    its id, parent, time and message, with facts added under `__openclaw`."""
    again = json.loads(json.dumps(message_entry))
    again["message"].setdefault("__openclaw", {}).update(facts)
    return again


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
            engine.process(session, lines[i], KafkaSource("sessions", 3, 100 + i)) for i in offsets
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
    late = engine.process(session, lines[2], KafkaSource("sessions", 3, 200))
    assert late.drop_rule == "redelivery"
    assert late.alerts[0].source == KafkaSource("sessions", 3, 200)


# --- rule 2: idempotent_replay ------------------------------------------------------------------


def test_idempotent_replay_drops_a_message_with_a_seen_key_and_content():
    first = user("send it", idempotency_key="msg-7f3a")
    replay = user("send it", idempotency_key="msg-7f3a")
    verdicts = run([header(), first, assistant(TEXT), replay])
    alert = check_drop(
        verdicts[3],
        kind="idempotent_replay",
        severity=Severity.INFO,
        entry_id=replay["id"],
        related=first["id"],
        line=4,
    )
    assert alert.evidence["idempotency_key"] == "msg-7f3a"
    assert alert.evidence["positional"] is False


def test_legacy_openclaw_idempotency_key_counts_too():
    first = user("send it", __openclaw={"idempotencyKey": "legacy-1"})
    replay = user("send it", __openclaw={"idempotencyKey": "legacy-1"})
    verdicts = run([header(), first, replay])
    assert drops(verdicts) == {replay["id"]: ("idempotent_replay", first["id"])}


def test_same_key_with_different_content_is_kept_with_a_collision_alert():
    first = user("send it", idempotency_key="msg-7f3a")
    other = user("no, wait, send the other one", idempotency_key="msg-7f3a")
    verdicts = run([header(), first, other])
    assert kept_ids(verdicts) == ["s1", first["id"], other["id"]]
    (collision,) = alerts(verdicts, "idempotency_key_collision")
    assert collision.severity is Severity.WARNING
    assert collision.action is Action.KEPT
    assert collision.entry_id == other["id"]
    assert collision.related_entry_id == first["id"]


def test_idempotency_fingerprint_ignores_ids_and_timestamps_but_not_role():
    """An assistant under a user's key is looked up among assistants, as OpenClaw's
    `scan-assistant` lookup does (a run's reply may carry its user turn's key): neither a
    replay of the user message nor a reuse of its key."""
    first = user("ok", idempotency_key="k1")
    same = user("ok", idempotency_key="k1")
    same["timestamp"] = "2027-01-01T00:00:00.000Z"
    as_assistant = assistant(content=first["message"]["content"], idempotency_key="k1")
    verdicts = run([header(), first, same, as_assistant])
    assert drops(verdicts) == {same["id"]: ("idempotent_replay", first["id"])}
    assert as_assistant["id"] in kept_ids(verdicts)
    assert not alerts(verdicts, "idempotency_key_collision")


def test_positional_keys_identify_by_scope_role_and_content():
    scope = "agent:main:whatsapp:run-5"
    u = user("summarize my inbox", idempotency_key=f"{scope}:user:0")
    a = assistant("3 new mails, none urgent.", idempotency_key=f"{scope}:assistant:1")
    # the same turn mirrored again after its snapshot shifted by one record
    u2 = user("summarize my inbox", idempotency_key=f"{scope}:user:0")
    a2 = assistant("3 new mails, none urgent.", idempotency_key=f"{scope}:assistant:2")
    verdicts = run([header(), u, a, u2, a2])
    assert drops(verdicts) == {
        u2["id"]: ("idempotent_replay", u["id"]),
        a2["id"]: ("idempotent_replay", a["id"]),
    }
    assert verdicts[4].alerts[-1].evidence == {
        "idempotency_key": f"{scope}:assistant:2",
        "positional": True,
    }
    (positional,) = alerts(verdicts, "positional_idempotency_key")
    assert positional.severity is Severity.INFO
    assert (positional.entry_id, positional.related_entry_id) == (None, u["id"])
    assert not alerts(verdicts, "idempotency_key_collision")


@pytest.mark.parametrize(
    ("second_key", "second_role"),
    [
        ("agent:main:run-6:user:0", "user"),  # another scope
        ("agent:main:run-5:assistant:0", "assistant"),  # another role
    ],
)
def test_positional_identity_differs_by_scope_or_role(second_key, second_role):
    first = user("yes", idempotency_key="agent:main:run-5:user:0")
    content = [{"type": "text", "text": "yes"}]
    if second_role == "user":
        second = user("yes", idempotency_key=second_key)
    else:
        second = assistant(content=content, idempotency_key=second_key)
    verdicts = run([header(), first, second])
    assert kept_ids(verdicts) == ["s1", first["id"], second["id"]]
    assert not alerts(verdicts, "idempotency_key_collision")


def test_reused_positional_key_with_new_content_is_kept_and_alerted():
    scope = "agent:main:run-5"
    a = assistant("first answer", idempotency_key=f"{scope}:assistant:1")
    b = assistant("the reasoning record", thinking="hmm", idempotency_key=f"{scope}:assistant:1")
    verdicts = run([header(), user(idempotency_key=f"{scope}:user:0"), a, b])
    assert verdicts[3].action is Action.KEPT
    (collision,) = alerts(verdicts, "idempotency_key_collision")
    assert (collision.entry_id, collision.related_entry_id) == (b["id"], a["id"])
    assert collision.evidence["positional"] is True


def test_positional_key_alert_is_raised_once_per_session():
    items = [header()]
    for n in range(4):
        items += [
            user(f"question {n}", idempotency_key=f"run-{n}:user:0"),
            assistant(f"answer number {n}", idempotency_key=f"run-{n}:assistant:1"),
        ]
    assert alert_kinds(run(items)).count("positional_idempotency_key") == 1
    assert alert_kinds(run(items, "s2")).count("positional_idempotency_key") == 1
    uuid_keys = [header(), user(idempotency_key="b02f2c54-f7d0-4bf2-943d-c17549b22947")]
    assert "positional_idempotency_key" not in alert_kinds(run(uuid_keys))


def test_redelivery_is_named_before_idempotent_replay():
    first = user("send it", idempotency_key="k1")
    verdicts = run([header(), first, first])
    assert drops(verdicts) == {first["id"]: ("redelivery", first["id"])}


# --- rule 3: delivery_mirror_duplicate ----------------------------------------------------------


@pytest.mark.parametrize(
    "make_mirror",
    [
        mirror,
        lambda text: mirror(text, model="gateway-injected"),
        lambda text: mirror(text, provider="bedrock", model="opus", kind="channel-final"),
    ],
    ids=["delivery-mirror", "gateway-injected", "openclawDeliveryMirror.kind"],
)
def test_delivery_mirror_duplicate_drops_a_mirror_of_the_reply(make_mirror):
    a = assistant(TEXT, thinking="the user wants the report")
    m = make_mirror(TEXT)
    verdicts = run([header(), user(), a, m])
    alert = check_drop(
        verdicts[3],
        kind="delivery_mirror_duplicate",
        severity=Severity.INFO,
        entry_id=m["id"],
        related=a["id"],
        line=4,
    )
    assert alert.evidence["model"] == m["message"]["model"]
    assert alert.id == run([header(), user(), a, m])[3].alerts[0].id


def test_mirror_equality_is_on_normalized_text():
    a = assistant(f"[[reply_to_current]]  {TEXT}\n\n")
    m = mirror(" ".join(TEXT.split(" ")).replace(" ", "\n  "))
    verdicts = run([header(), user(), a, m])
    assert drops(verdicts) == {m["id"]: ("delivery_mirror_duplicate", a["id"])}


def test_mirror_with_new_text_is_a_real_outbound_message():
    a = assistant("I'll send it now.", tool_calls=["call_1"])
    m = mirror("1+1 sama dengan bahlil", kind="message-tool-source-reply")
    verdicts = run([header(), user(), a, m, tool_result("call_1", parent=a["id"])])
    assert not drops(verdicts)


def test_mirror_repeating_the_previous_turn_is_kept():
    a = assistant(TEXT)
    verdicts = run([header(), user(), a, user("thanks"), mirror(TEXT)])
    assert not drops(verdicts)


def test_mirror_compares_with_every_reply_of_the_turn():
    """OpenClaw delivers the text before a tool call as a block of its own, and mirrors the
    turn's deliveries after its last reply (the corpus has such a turn)."""
    a = assistant(TEXT, tool_calls=["c1"])
    b = assistant("Something else entirely, now that the tool answered.")
    m = mirror(TEXT)
    verdicts = run([header(), user(), a, tool_result("c1"), b, m])
    assert drops(verdicts) == {m["id"]: ("delivery_mirror_duplicate", a["id"])}
    # an assistant without text does not count as the latest text
    c = assistant(TEXT, tool_calls=["c2"])
    silent = assistant(tool_calls=["c3"])
    m = mirror(TEXT)
    verdicts = run([header(), user(), c, tool_result("c2"), silent, tool_result("c3"), m])
    assert drops(verdicts) == {m["id"]: ("delivery_mirror_duplicate", c["id"])}


# A mirror is compared with model replies: an earlier mirror with its text is another send,
# unless nothing tells the two apart.


def test_a_mirror_repeating_a_kept_mirror_is_a_replay_only_without_an_identity():
    a = assistant("I'll send the summary to the channel.", tool_calls=["c1"])
    sent = mirror(TEXT)  # new text: a real outbound message
    replay = mirror(TEXT)
    keyed = mirror(TEXT, idempotency_key="send-2")
    final = mirror(TEXT, marker={"sourceMessageId": "message-2"})
    verdicts = run([header(), user(), a, sent, replay, keyed, final])
    assert drops(verdicts) == {replay["id"]: ("delivery_mirror_duplicate", sent["id"])}


def test_distinct_channel_finals_with_the_same_text_are_two_sends():
    first = mirror(TEXT, idempotency_key="channel-final:m1:0", marker={"sourceMessageId": "m1"})
    second = mirror(TEXT, idempotency_key="channel-final:m2:0", marker={"sourceMessageId": "m2"})
    assert not drops(run([header(), user(), first, second]))


def test_every_mirror_repeating_the_reply_is_dropped_however_many_came_before():
    """The reply is the message; its deliveries are copies of it. Keeping the second would not
    survive a second cleaning (without the first, it is the reply's only copy)."""
    a = assistant(TEXT)
    m1, m2 = mirror(TEXT, idempotency_key="k1"), mirror(TEXT, idempotency_key="k2")
    verdicts = run([header(), user(), a, m1, m2])
    assert drops(verdicts) == {
        m1["id"]: ("delivery_mirror_duplicate", a["id"]),
        m2["id"]: ("delivery_mirror_duplicate", a["id"]),
    }
    assert not drops(run(outputs(verdicts)))


def test_a_mirror_after_a_mirror_with_other_text_still_repeats_the_reply():
    """A kept mirror between them hides nothing: the mirror records no send of its own, and
    repeats a reply of its turn (OpenClaw's writer compares with the latest row only)."""
    a = assistant(TEXT)
    other = mirror("And here is the chart you asked for.")
    again = mirror(TEXT)
    verdicts = run([header(), user(), a, other, again])
    assert drops(verdicts) == {again["id"]: ("delivery_mirror_duplicate", a["id"])}


@pytest.mark.parametrize("between", ["heartbeat", "announce", "forwarded"])
def test_a_mirror_after_openclaw_s_own_input_still_repeats_the_reply(between):
    """A heartbeat, a completion announce or another session's send is OpenClaw's input, not
    a person's: a mirror after it that repeats the reply before it is a copy (#64152)."""
    provenance = {
        "heartbeat": {"kind": "internal_system", "sourceTool": "heartbeat"},
        "announce": {"kind": "inter_session", "sourceTool": "subagent_announce"},
        "forwarded": {"kind": "inter_session", "sourceTool": "sessions_send"},
    }[between]
    a = assistant(TEXT)
    wake = user("[OpenClaw system event]", provenance=provenance)
    again = mirror(TEXT)
    verdicts = run([header(), user(), a, wake, assistant("Noted."), again])
    assert drops(verdicts) == {again["id"]: ("delivery_mirror_duplicate", a["id"])}


@pytest.mark.parametrize("provenance", [None, {"kind": "external_user", "sourceTool": "acp"}])
def test_a_mirror_after_a_person_s_message_delivers_an_answer_to_it(provenance):
    """OpenClaw's session memory keeps it (tests/peer: session-memory)."""
    a = assistant(TEXT)
    verdicts = run([header(), user(), a, user("again?", provenance=provenance), mirror(TEXT)])
    assert not drops(verdicts)


def test_a_mirror_in_a_turn_that_sent_through_the_message_tool_records_that_send():
    a = assistant(TEXT)
    send = assistant("Sending it to the team.", tool_calls=["call_send_1"])
    send["message"]["content"][-1]["name"] = "message"
    verdicts = run([header(), user(), a, send, tool_result("call_send_1"), mirror(TEXT)])
    assert not drops(verdicts)


# What the mirror says it delivered decides what it is compared with.


def gateway_send(text, key="idem-test-1", **fields):
    """OpenClaw 2026.9.6's `gateway send` mirror (tests/data/openclaw-live): a key, no marker."""
    return mirror(
        text,
        idempotency_key=key,
        api="openclaw-transcript",
        stop_reason="stop",
        openclawDelivery={"mediaUrls": []},
        **fields,
    )


def test_a_gateway_send_repeating_the_latest_reply_is_dropped():
    a = assistant(TEXT, thinking="t")
    cache = custom()
    m = gateway_send(TEXT)
    verdicts = run([header(), user(), a, cache, custom("openclaw:bootstrap-context:full"), m])
    assert drops(verdicts) == {m["id"]: ("delivery_mirror_duplicate", a["id"])}


def test_a_channel_final_naming_only_its_own_send_repeats_the_reply_it_hangs_below():
    """Its `sourceMessageId` identifies a send of its own and it names no reply: what it
    delivered is a latest reply that declares it is mirrored (`__openclaw.mirrorIdentity`),
    or the reply its `parentId` names, whose text it repeats (rows before 2026.9.6)."""
    for marker in ({"sourceMessageId": "message-1"}, {"sourceTurnId": "channel-user:v1:m1"}):
        a = assistant(TEXT, thinking="t")
        m = mirror(TEXT, idempotency_key="channel-final:message-1:0", marker=marker)
        assert drops(run([header(), user(), a, m])) == {
            m["id"]: ("delivery_mirror_duplicate", a["id"])
        }, marker
        mirrored = assistant(TEXT, __openclaw={"mirrorIdentity": "run-1:assistant"})
        cache = custom()
        m = mirror(TEXT, idempotency_key="channel-final:message-1:0", marker=marker)
        verdicts = run([header(), user(), mirrored, cache, m])
        assert drops(verdicts) == {m["id"]: ("delivery_mirror_duplicate", mirrored["id"])}
        other = assistant("Other words.", __openclaw={"mirrorIdentity": "run-1:assistant"})
        assert not drops(run([header(), user(), other, mirror(TEXT, marker=marker)]))


@pytest.mark.parametrize("case", ["below-user", "below-custom", "below-kept-send", "other-text",
                                  "media-on-mirror", "media-on-reply"])
def test_a_channel_final_naming_only_its_own_send_elsewhere_is_kept(case):
    u = user()
    reply = assistant(TEXT, thinking="t")
    if case == "media-on-reply":
        reply["message"]["content"].append(
            {"type": "image", "source": {"type": "url", "url": "https://example.test/t.png"}})
    items = [header(), u, reply]
    parent = reply["id"]
    if case == "below-user":
        parent = u["id"]
    elif case == "below-custom":
        cache = custom()
        items.append(cache)
        parent = cache["id"]
    elif case == "below-kept-send":
        # the first send carries a document, so it is kept; the second send hangs below it
        first = mirror(TEXT, idempotency_key="telegram-final:t0:0",
                       marker={"sourceMessageId": "t0"},
                       openclawDelivery={"mediaUrls": ["/tmp/report.pdf"]})
        items.append(first)
        parent = first["id"]
    text = "Here is the chart." if case == "other-text" else TEXT
    final = mirror(text, idempotency_key="telegram-final:t1:0", marker={"sourceMessageId": "t1"},
                   parent=parent)
    if case == "media-on-mirror":
        final["message"]["openclawDelivery"] = {"mediaUrls": ["/tmp/chart.png"]}
    verdicts = run([*items, final])
    assert final["id"] not in drops(verdicts)


def test_a_mirror_naming_its_source_is_compared_with_that_reply():
    named = assistant(TEXT)
    later = assistant("Sent. Anything else?")
    m = mirror(TEXT, marker={"sourceMessageId": "m1", "sourceAssistantMessageId": named["id"]})
    items = [header(), user(), named, custom(), later, m]
    verdicts = run(items)
    assert drops(verdicts) == {m["id"]: ("delivery_mirror_duplicate", named["id"])}
    assert not drops(run(outputs(verdicts)))
    # Only final replies (no tool calls) remember their text beyond the turn state, which
    # keeps memory small: a mirror naming a reply that called tools, after a later reply, is
    # not known to repeat it.
    calls = assistant(TEXT, tool_calls=["c1"])
    m = mirror(TEXT, marker={"sourceMessageId": "m1", "sourceAssistantMessageId": calls["id"]})
    assert not drops(run([header(), user(), calls, tool_result("c1"), later, m]))
    m = mirror(TEXT, marker={"sourceMessageId": "m1", "sourceAssistantMessageId": calls["id"]})
    assert drops(run([header(), user(), calls, m])) == {
        m["id"]: ("delivery_mirror_duplicate", calls["id"])
    }


@pytest.mark.parametrize("case", ["absent", "other-text", "previous-turn", "forgotten", "mirror"])
def test_a_mirror_naming_another_source_is_not_a_copy_of_the_latest_reply(case):
    a = assistant(TEXT)
    source = {
        "absent": "real-answer",
        "other-text": None,
        "previous-turn": a["id"],
        "forgotten": a["id"],
        "mirror": None,
    }[case]
    items = [header(), user(), a]
    if case == "other-text":
        b = assistant("Something else.")
        items += [b]
        source = b["id"]
    if case == "previous-turn":
        items += [user("and again?")]
    if case == "forgotten":
        items += [assistant("Something else."), custom(), custom(), custom()]
    if case == "mirror":
        sent = mirror(TEXT, idempotency_key="k0", marker={"sourceMessageId": "m0"},
                      parent=items[1]["id"])
        items += [sent]
        source = sent["id"]
    m = mirror(TEXT, marker={"sourceMessageId": "m1", "sourceAssistantMessageId": source})
    limits = Limits(max_ids=3) if case == "forgotten" else None
    assert not drops(run([*items, m], limits=limits)), case
    if case == "forgotten":  # remembered, the same mirror repeats it
        assert drops(run([*items, m])) == {m["id"]: ("delivery_mirror_duplicate", a["id"])}


def test_a_mirror_below_a_reply_with_its_text_repeats_it_when_the_branch_moved_back():
    """OpenClaw's writer compares with the tail of the active branch, which a `leaf` entry
    moved back to the first reply; the mirror hangs below it."""
    active = assistant("Active branch reply")
    inactive = assistant("Inactive branch reply")
    leaf = entry("leaf", parent=inactive["id"], targetId=active["id"])
    m = mirror("Active branch reply", parent=active["id"])
    verdicts = run([header(), user(), active, inactive, leaf, m])
    assert drops(verdicts) == {m["id"]: ("delivery_mirror_duplicate", active["id"])}
    # a send of its own too; not across a user message, and not for other text
    own = mirror("Active branch reply", parent=active["id"], marker={"sourceMessageId": "m1"})
    assert drops(run([header(), user(), active, inactive, own])) == {
        own["id"]: ("delivery_mirror_duplicate", active["id"])
    }
    u = user("next")
    moved = mirror("Active branch reply", parent=active["id"])
    assert not drops(run([header(), user(), active, inactive, u, moved]))
    other = mirror("Inactive branch reply, resent", parent=active["id"])
    assert not drops(run([header(), user(), active, inactive, other]))


# A mirror that carries more than the reply's text, or the reply more than the mirror's.

IMAGE = {"type": "image", "source": {"type": "url", "url": "https://example.test/t.png"}}
ATTACHMENT = {"type": "attachment", "attachment": {"kind": "document", "label": "t.pdf"}}
MEDIA = {"media": [{"path": "media://inbound/timetable", "contentType": "image/png"}]}


@pytest.mark.parametrize(
    "side",
    [
        "reply-image-block",
        "reply-display-attachment",
        "reply-display-tool-call",
        "reply-media-facts",
        "reply-delivered-media",
        "mirror-image-block",
        "mirror-display-attachment",
        "mirror-media-facts",
        "mirror-delivered-media",
        "mirror-delivered-media-url",
    ],
)
def test_media_on_one_side_keeps_the_mirror(side):
    text_block = {"type": "text", "text": TEXT}
    display = [text_block, ATTACHMENT]
    reply_fields: dict = {
        "reply-image-block": {"content": [text_block, IMAGE]},
        "reply-display-attachment": {"openclawDisplayContent": display},
        "reply-display-tool-call": {
            "openclawDisplayContent": [text_block, {"type": "toolCall", "id": "t1", "name": "x"}]
        },
        "reply-media-facts": {"__openclaw": MEDIA},
        "reply-delivered-media": {"openclawDelivery": {"mediaUrls": ["/tmp/chart.png"]}},
    }.get(side, {})
    a = assistant(TEXT if "content" not in reply_fields else None, **reply_fields)
    mirror_fields: dict = {
        "mirror-display-attachment": {"openclawDisplayContent": display},
        "mirror-media-facts": {"__openclaw": MEDIA},
        "mirror-delivered-media": {"openclawDelivery": {"mediaUrls": ["/tmp/chart.png"]}},
        "mirror-delivered-media-url": {"openclawDelivery": {"mediaUrl": "/tmp/chart.png"}},
    }.get(side, {})
    m = mirror(TEXT, **mirror_fields)
    if side == "mirror-image-block":
        m["message"]["content"].append(IMAGE)
    named = mirror(TEXT, marker={"sourceAssistantMessageId": a["id"]}, **mirror_fields)
    if side == "mirror-image-block":
        named["message"]["content"].append(IMAGE)
    assert not drops(run([header(), user(), a, m])), side
    assert not drops(run([header(), user(), a, named])), side


def test_thinking_and_tool_calls_of_the_reply_are_not_media():
    display = [{"type": "reasoning", "text": "t"}, {"type": "text", "text": TEXT}]
    a = assistant(TEXT, thinking="t", tool_calls=["c1"], openclawDisplayContent=display)
    a["message"]["content"].insert(0, {"type": "reasoning", "text": "more"})
    m = gateway_send(TEXT)
    assert drops(run([header(), user(), a, m])) == {m["id"]: ("delivery_mirror_duplicate", a["id"])}


# Commentary is not the answer a mirror delivers.


def phased(text, phase):
    signature = json.dumps({"v": 1, "id": phase, "phase": phase})
    return {"type": "text", "text": text, "textSignature": signature}


def test_a_mirror_repeats_the_final_answer_without_the_commentary():
    content = [phased("I will check the departure.", "commentary"),
               phased("The train leaves at noon.", "final_answer")]
    a = assistant(content=[{"type": "thinking", "thinking": "t"}, *content])
    m = mirror("The train leaves at noon.", marker={"sourceAssistantMessageId": a["id"]})
    unnamed = gateway_send("The train leaves at noon.")
    assert drops(run([header(), user(), a, m])) == {m["id"]: ("delivery_mirror_duplicate", a["id"])}
    assert set(drops(run([header(), user(), a, unnamed]))) == {unnamed["id"]}
    # the reply's own visible text is unchanged: its cleaned child still carries both parts
    child = assistant(content=content, parent=a["id"], usage=None)
    assert set(drops(run([header(), user(), a, child]))) == {child["id"]}
    # the whole visible text, commentary included, is not what was delivered
    both = mirror("I will check the departure.\nThe train leaves at noon.")
    assert not drops(run([header(), user(), a, both]))


@pytest.mark.parametrize(
    "signature",
    [
        "legacy-signature-id",
        '{"v": 2, "phase": "commentary"}',
        '{"v": true, "phase": "commentary"}',
        '{"v": 1, "phase": "Commentary"}',
        "{not json",
        '{"v": 1}',
        "[1]",
    ],
)
def test_a_signature_without_a_commentary_phase_leaves_the_text_whole(signature):
    content = [{"type": "text", "text": "Checking.", "textSignature": signature},
               {"type": "text", "text": "Noon."}]
    a = assistant(content=content)
    m = mirror("Checking.\nNoon.")
    assert drops(run([header(), user(), a, m])) == {m["id"]: ("delivery_mirror_duplicate", a["id"])}


def test_a_reply_whose_own_phase_is_commentary_delivers_nothing():
    a = assistant("Let me look that up.", phase="commentary")
    assert not drops(run([header(), user(), a, mirror("Let me look that up.")]))


@pytest.mark.parametrize("kind", ["unknown", "message-tool", {"nested": 1}, ""])
def test_a_reply_with_a_mirror_kind_openclaw_does_not_know_is_a_model_reply(kind):
    """OpenClaw honours only the kinds it writes: such a reply is a model turn, and no mirror."""
    a = assistant(TEXT)
    marked = assistant(
        TEXT, provider="openai", model="gpt-5", parent=None, openclawDeliveryMirror={"kind": kind}
    )
    verdicts = run([header(), user(), a, marked])
    assert not drops(verdicts)
    assert [x.related_entry_id for x in alerts(verdicts, "consecutive_assistant")] == [a["id"]]


def test_a_non_mirror_assistant_is_not_a_delivery_mirror():
    verdicts = run(
        [
            header(),
            user(),
            assistant(TEXT),
            assistant(TEXT, provider="openai", model="gpt-5", parent=None),
        ]
    )
    assert not drops(verdicts)


# --- rule 4: cli_mirror_duplicate ---------------------------------------------------------------


def cli_copy(text, **kw):
    return assistant(text, api="cli", provider="claude-cli", model="opus", **kw)


def test_cli_mirror_duplicate_skips_non_message_entries():
    a = assistant(TEXT, thinking="thinking hard")
    c = cli_copy(TEXT)
    verdicts = run([header(), user(), a, custom("openclaw.cache-ttl"), c])
    check_drop(
        verdicts[4],
        kind="cli_mirror_duplicate",
        severity=Severity.WARNING,
        entry_id=c["id"],
        related=a["id"],
        line=5,
    )


def test_cli_copy_after_a_dropped_mirror_compares_with_the_kept_reply():
    a = assistant(TEXT)
    m, c = mirror(TEXT), cli_copy(TEXT)
    verdicts = run([header(), user(), a, m, c])
    assert drops(verdicts) == {
        m["id"]: ("delivery_mirror_duplicate", a["id"]),
        c["id"]: ("cli_mirror_duplicate", a["id"]),
    }


@pytest.mark.parametrize(
    "between",
    [
        lambda: [user("and now?")],
        lambda: [tool_result("c1")],
    ],
    ids=["user", "toolResult"],
)
def test_cli_copy_whose_previous_message_is_not_an_assistant_is_kept(between):
    a = assistant(TEXT, tool_calls=["c1"])
    verdicts = run([header(), user(), a, *between(), cli_copy(TEXT)])
    assert not drops(verdicts)


def test_cli_reply_with_new_text_is_kept():
    verdicts = run([header(), user(), assistant(TEXT), cli_copy("Another reply, other words.")])
    assert not drops(verdicts)


# --- rule 5: cleaned_child_duplicate ------------------------------------------------------------


def test_cleaned_child_duplicate_drops_the_text_only_child():
    a = assistant(TEXT, thinking="the raw reply carries its reasoning")
    child = assistant(TEXT, parent=a["id"], usage=None)
    verdicts = run([header(), user(), a, child])
    check_drop(
        verdicts[3],
        kind="cleaned_child_duplicate",
        severity=Severity.INFO,
        entry_id=child["id"],
        related=a["id"],
        line=4,
    )


def test_cleaned_child_with_string_content_and_the_parents_usage_is_dropped():
    a = assistant(TEXT, thinking="reasoning")
    child = assistant(content=TEXT, provider="openai", model="gpt-5", usage=a["message"]["usage"])
    verdicts = run([header(), user(), a, child])
    assert drops(verdicts) == {child["id"]: ("cleaned_child_duplicate", a["id"])}


def test_a_child_billed_on_its_own_is_a_second_model_turn():
    """Same text, usage of its own: a second call that said the same, not a cleaned copy
    (OpenClaw's replay keeps adjacent identical turns with real usage, #99504)."""
    a = assistant(TEXT, thinking="reasoning")
    child = assistant(content=TEXT, provider="openai", model="gpt-5")
    assert not drops(run([header(), user(), a, child]))
    plain = assistant(TEXT)
    again = assistant(TEXT, usage=plain["message"]["usage"])
    assert not drops(run([header(), user(), plain, again]))


def test_a_zero_usage_receipt_of_a_plain_reply_is_dropped():
    """OpenClaw's bare delivery receipt: right after the reply, no marker, zero usage, stop."""
    a = assistant(TEXT, provider="amazon-bedrock", model="claude-haiku")
    receipt = assistant(TEXT, provider="amazon-bedrock", model="claude-haiku", usage=zero_usage())
    verdicts = run([header(), user(), a, receipt])
    check_drop(
        verdicts[3],
        kind="cleaned_child_duplicate",
        severity=Severity.INFO,
        entry_id=receipt["id"],
        related=a["id"],
        line=4,
    )
    # a custom entry between is no message: still right after the reply
    a = assistant(TEXT)
    receipt = assistant(TEXT, usage=zero_usage(), parent=a["id"])
    assert drops(run([header(), user(), a, custom(), receipt])) == {
        receipt["id"]: ("cleaned_child_duplicate", a["id"])
    }


@pytest.mark.parametrize(
    "shape",
    [
        "usage-absent",
        "stop-length",
        "marker-of-unknown-kind",
        "parent-calls-tools",
        "parent-is-a-mirror",
        "parent-has-an-image",
        "a-tool-result-between",
        "no-lineage",
    ],
)
def test_receipt_near_misses_are_kept(shape):
    a = assistant(TEXT, tool_calls=["c1"] if shape == "parent-calls-tools" else ())
    if shape == "parent-is-a-mirror":
        a = mirror(TEXT)
    if shape == "parent-has-an-image":
        image = {"type": "image", "source": {"type": "url", "url": "https://example.test/a.png"}}
        a = assistant(content=[{"type": "text", "text": TEXT}, image])
    between = [tool_result("c1")] if shape == "a-tool-result-between" else []
    fields: dict = {"usage": None if shape == "usage-absent" else zero_usage()}
    if shape == "stop-length":
        fields["stop_reason"] = "length"
    if shape == "marker-of-unknown-kind":
        fields["openclawDeliveryMirror"] = {"kind": "unknown"}
    parent = None if shape == "no-lineage" else a["id"]
    receipt = assistant(TEXT, parent=parent, **fields)
    assert not drops(run([header(), user(), a, *between, receipt]))


def test_cleaned_child_rule_keeps_its_near_misses():
    a = assistant(TEXT, thinking="reasoning")
    # distinct messages
    assert not drops(run([header(), user(), a, assistant("A different text.")]))
    # equal text separated by a user message (the child still names the reply as parent)
    u = user("say it again")
    assert not drops(run([header(), user(), a, u, assistant(TEXT, parent=a["id"])]))
    # equal text with no parentId lineage (a counted, different usage: not an echo either)
    no_lineage = [header(), user(), a, custom(), assistant(TEXT)]
    assert not drops(run(no_lineage))
    # the child also thinks, or calls tools: not a cleaned copy
    assert not drops(run([header(), user(), a, assistant(TEXT, thinking="again", usage=None)]))
    assert not drops(run([header(), user(), a, assistant(TEXT, tool_calls=["c9"], usage=None)]))


# --- rule 6: mistagged_echo ---------------------------------------------------------------------


@pytest.mark.parametrize("usage", ["absent", "zero", "identical"])
def test_mistagged_echo_drops_an_echo_carrying_the_reply_metadata(usage):
    a = assistant(TEXT, thinking="think", provider="anthropic", model="claude-opus-4-5")
    echo_usage = {"absent": None, "zero": zero_usage(), "identical": a["message"]["usage"]}[usage]
    cache = custom()
    echo = assistant(TEXT, parent=cache["id"], usage=echo_usage)
    verdicts = run([header(), user(), a, cache, echo])
    alert = check_drop(
        verdicts[4],
        kind="mistagged_echo",
        severity=Severity.WARNING,
        entry_id=echo["id"],
        related=a["id"],
        line=5,
    )
    assert alert.evidence["provider"] == "anthropic"
    assert alert.evidence["model"] == "claude-opus-4-5"
    assert alert.evidence["usage"] == usage


@pytest.mark.parametrize(
    "echo_kwargs",
    [
        {"usage": "counted"},  # a real, separately billed call
        {"provider": "openai"},
        {"model": "claude-sonnet-4-6"},
        {"thinking": "more thinking"},
        {"tool_calls": ["c7"]},
        {"text": "Same start, different reply."},
    ],
)
def test_mistagged_echo_near_misses_are_kept(echo_kwargs):
    a = assistant(TEXT, thinking="think")
    kwargs = {"text": TEXT, "usage": None, "parent": None, **echo_kwargs}
    if kwargs["usage"] == "counted":
        del kwargs["usage"]
    verdicts = run([header(), user(), a, assistant(**kwargs)])
    assert not drops(verdicts)


def test_mistagged_echo_needs_thinking_in_the_earlier_reply_and_adjacency():
    plain = assistant(TEXT)
    assert not drops(run([header(), user(), plain, assistant(TEXT, usage=None, parent=None)]))
    a = assistant(TEXT, thinking="think", tool_calls=["c1"])
    echo = assistant(TEXT, usage=None, parent=None)
    assert not drops(run([header(), user(), a, tool_result("c1"), echo]))


# --- all echo rules -----------------------------------------------------------------------------


@pytest.mark.parametrize("empty", ["", "   \n\t", "[[reply_to_current]]"])
def test_echo_rules_never_fire_on_empty_text(empty):
    a = assistant(empty, thinking="only thinking")
    items = [
        header(),
        user(),
        a,
        mirror(empty),
        cli_copy(empty),
        assistant(empty, parent=a["id"], usage=None),
        assistant(empty, usage=None),
    ]
    verdicts = run(items)
    assert not drops(verdicts)
    assert len(kept(verdicts)) == len(items)


# --- re-parenting -------------------------------------------------------------------------------


def test_child_of_a_dropped_entry_is_reparented_and_only_it_is_reserialized():
    a = assistant(TEXT)
    m = mirror(TEXT)
    level = {"type": "thinking_level_change", "id": "lvl1", "parentId": m["id"], "level": "low"}
    nxt = user("and another thing")
    items = [header(), user(), a, m, level, nxt]
    lines = encode(items)
    # Unusual spacing survives on every line that is not re-parented.
    lines[2] = lines[2].replace(b'","', b'", "')
    verdicts = process(Engine(), new_session(), lines)
    assert drops(verdicts) == {m["id"]: ("delivery_mirror_duplicate", a["id"])}
    out = [v.output for v in verdicts]
    for index in (0, 1, 2, 5):
        assert out[index] == lines[index]
    reparented = json.loads(out[4])
    assert reparented == {**json.loads(lines[4]), "parentId": a["id"]}
    assert list(reparented) == list(json.loads(lines[4]))  # key order kept
    assert_valid_tree(verdicts)


def test_reparenting_skips_a_chain_of_dropped_entries():
    a = assistant(TEXT)
    m = mirror(TEXT)
    c = cli_copy(TEXT)
    after = user("next question")
    verdicts = run([header(), user(), a, m, c, after])
    assert set(drops(verdicts)) == {m["id"], c["id"]}
    assert kept(verdicts)[-1]["parentId"] == a["id"]
    assert_valid_tree(verdicts)


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


def test_cleaned_child_under_a_dropped_mirror_is_dropped_in_the_first_pass():
    """Its cleaned parent is the reply, so a second cleaning would drop it otherwise."""
    a = assistant(TEXT, thinking="thinking")
    m = mirror(TEXT)
    child = assistant(TEXT, provider="openai", model="gpt-5", parent=m["id"], usage=None)
    verdicts = run([header(), user(), a, m, child])
    assert drops(verdicts) == {
        m["id"]: ("delivery_mirror_duplicate", a["id"]),
        child["id"]: ("cleaned_child_duplicate", a["id"]),
    }
    again = run(outputs(verdicts))
    assert not drops(again)


@pytest.mark.xfail(
    strict=True,
    reason="known gap: rule 1 compares the versions of a reused id as received, not as "
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


def test_a_dropped_message_leaves_its_idempotency_key_unused():
    """Found by hypothesis: a child dropped by rule 5 had moved key k1 to its own content, so
    a later reply with k1 was kept beside a collision alert in the first cleaning and dropped
    as a replay in the second. A dropped entry leaves no trace, and gets one alert."""
    raw = assistant("Hello there, friend.", thinking="thought", idempotency_key="k1")
    child = assistant("Hello there, friend.", parent=raw["id"], idempotency_key="k1",
                      usage=raw["message"]["usage"])
    again = assistant("Hello there, friend.", thinking="thought", idempotency_key="k1",
                      parent=child["id"], usage=raw["message"]["usage"])
    first = run([header(), user(parent=None), raw, child, again])
    assert drops(first) == {child["id"]: ("cleaned_child_duplicate", raw["id"]),
                            again["id"]: ("idempotent_replay", raw["id"])}
    assert [a.kind for a in alerts(first) if a.entry_id == child["id"]] == [
        "cleaned_child_duplicate"]
    second = run(outputs(first))
    assert not drops(second)
