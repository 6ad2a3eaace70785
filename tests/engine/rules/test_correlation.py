"""A copy that says what it copies (rules/correlation): `delivery_mirror_duplicate` by the
correlation a mirror carries, and `uncorrelated_mirror_copy`; positives and near misses side by
side."""

from __future__ import annotations

import json

import pytest

from stream.engine import (
    Limits,
    Severity,
)
from tests.support.builders import (
    alerts,
    assert_clean_twice_is_clean,
    assistant,
    custom,
    drops,
    entry,
    header,
    mirror,
    outputs,
    run,
    tool_result,
    user,
)
from tests.support.rule_tests import AGENDA, TEXT, channel_final, check_drop


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


IMAGE = {"type": "image", "source": {"type": "url", "url": "https://example.test/t.png"}}


ATTACHMENT = {"type": "attachment", "attachment": {"kind": "document", "label": "t.pdf"}}


MEDIA = {"media": [{"path": "media://inbound/timetable", "contentType": "image/png"}]}


def phased(text, phase):
    signature = json.dumps({"v": 1, "id": phase, "phase": phase})
    return {"type": "text", "text": text, "textSignature": signature}


# --- `delivery_mirror_duplicate` ------------------------------------------------------------------

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
def test_64152_a_mirror_after_openclaw_s_own_input_still_repeats_the_reply(between):
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


# --- channel finals that name no source (#126090, #121643): `uncorrelated_mirror_copy` -----------

def test_126090_a_channel_final_naming_no_source_below_its_reply_is_dropped():
    """#126090, #121643: before 2026.9.6 every Telegram turn wrote a channel final naming only
    its send, parented to the reply it delivered (`api: "cli"` replies too)."""
    for api in ("anthropic-messages", "cli"):
        reply = assistant(AGENDA, api=api)
        final = channel_final(AGENDA, "telegram-final:agent:main:main:t1:0")
        verdicts = run([header(), user(), reply, final])
        assert drops(verdicts) == {final["id"]: ("delivery_mirror_duplicate", reply["id"])}
        assert_clean_twice_is_clean(verdicts)


def test_126090_a_second_channel_final_below_the_first_is_another_send_and_kept():
    """The first, below the reply, is its delivery; a second one below it is a send of its
    own (#126090's near miss). Cleaned, it hangs below the reply, where a second cleaning
    would take it for the first: the one place `clean` is not idempotent (docs/rules.md)."""
    reply = assistant(AGENDA)
    first = channel_final(AGENDA, "t1")
    second = channel_final(AGENDA, "t2")
    verdicts = run([header(), user(), reply, first, second])
    assert drops(verdicts) == {first["id"]: ("delivery_mirror_duplicate", reply["id"])}
    (alert,) = alerts(verdicts, "uncorrelated_mirror_copy")
    assert (alert.entry_id, alert.related_entry_id) == (second["id"], reply["id"])


def test_126090_a_channel_final_naming_no_source_elsewhere_is_kept_and_reported():
    reply = assistant(AGENDA)
    cache = custom()
    final = channel_final(AGENDA, "telegram-final:agent:main:main:t1:0")
    verdicts = run([header(), user(), reply, cache, final])
    assert not drops(verdicts)
    (alert,) = alerts(verdicts, "uncorrelated_mirror_copy")
    assert (alert.entry_id, alert.related_entry_id, alert.severity) == (
        final["id"], reply["id"], "info")


@pytest.mark.parametrize("case", ["named", "new-text", "media", "send-mirror", "identity"])
def test_126090_uncorrelated_final_near_misses_raise_nothing(case):
    fields = {"__openclaw": {"mirrorIdentity": "run-1:assistant"}} if case == "identity" else {}
    reply = assistant(AGENDA, **fields)
    if case == "named":
        final = mirror(AGENDA, marker={"sourceAssistantMessageId": reply["id"]})
    elif case == "send-mirror":
        final = mirror(AGENDA, idempotency_key="idem-1", api="openclaw-transcript")
    else:
        final = channel_final("Here is the chart." if case == "new-text" else AGENDA, "tg-1")
    if case == "media":
        final["message"]["openclawDelivery"] = {"mediaUrls": ["/tmp/chart.png"]}
    cache = custom()
    final["parentId"] = cache["id"]
    verdicts = run([header(), user(), reply, cache, final])
    assert not alerts(verdicts, "uncorrelated_mirror_copy")
