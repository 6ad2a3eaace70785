"""The identities OpenClaw wrote inside message text, read from strings its own template
functions make, release by release (tests/data/openclaw-templates/text-identities.json: each
case names the release, the writer function and where the text lands)."""

from __future__ import annotations

import json

import pytest

from stream.engine.inbound_text import announce_only, announces, inbound_id, words_hash
from tests.support.data import DATA

CASES = json.loads((DATA / "openclaw-templates" / "text-identities.json").read_text())


def by_family(*families: str) -> list[dict]:
    return [case for case in CASES if case["family"] in families]


@pytest.mark.parametrize("case", by_family("message_id_line", "conversation_info", "none"),
                         ids=lambda case: case["id"])
def test_the_inbound_message_id_is_read_as_the_release_wrote_it(case):
    expected = case["expected"]
    info = expected.get("conversation_info")
    wanted = (info or {}).get("message_id") or expected.get("message_id_line_first") \
        or expected.get("message_id_line")
    got = inbound_id(case["text"])
    if wanted is None:
        assert got is None
    else:
        assert got is not None and got.endswith("\x00" + str(wanted))


@pytest.mark.parametrize("case", by_family("announce_event", "announce_system_message",
                                           "announce_stats"), ids=lambda case: case["id"])
def test_a_completion_announce_names_its_child_session(case):
    got = announces(case["text"])
    wanted = case["expected"]["announce"]
    assert len(got) == len(wanted)
    for (session, report), expected in zip(got, wanted, strict=True):
        assert session.endswith("\x00" + expected["session_id"])
        assert report


def by_id(case_id: str) -> str:
    return next(case["text"] for case in CASES if case["id"] == case_id)


@pytest.mark.parametrize(("inline", "deferred"), [
    ("announce-2026.7.35-steer", "announce-2026.7.35-agent"),
    ("announce-2026.9.6-steer", "announce-2026.9.6-agent"),
])
def test_125797_one_completion_delivered_inline_and_deferred_reports_the_same(inline, deferred):
    """The line before `source:` says how the event was delivered, not what it reports."""
    assert announces(by_id(inline)) == announces(by_id(deferred))


def test_17122_a_completion_queued_again_reports_what_it_reported_alone():
    direct, [first, second] = announces(by_id("announce-2.12-agent")), announces(
        by_id("announce-2.12-collect"))
    assert direct == [first]
    assert second[0] != first[0]


def test_an_announce_quoted_in_a_person_s_message_announces_nothing():
    quoted = "Why did you skip this one?\n\n" + by_id("announce-2.12-agent").split("] ", 1)[1]
    assert announces(quoted) == []


def test_the_same_child_session_reporting_other_findings_reports_otherwise():
    text = by_id("announce-2.12-agent")
    [(session, report)] = announces(text)
    [(again, other)] = announces(text.replace("All 214 tests pass.", "2 tests fail."))
    assert again == session and other != report
    event = by_id("announce-2026.9.6-agent")
    assert announces(event)[0][1] != announces(event.replace("3 errors", "4 errors"))[0][1]


@pytest.mark.parametrize("case", by_family("announce_event", "announce_system_message",
                                           "announce_stats"), ids=lambda case: case["id"])
def test_an_announce_is_alone_in_its_framing_but_not_beside_a_person_s_words(case):
    """Each release's announce, as its template writes it, holds nothing but OpenClaw's own
    text; a person's paragraph before or after it (`prependInternalEventContext` puts an event
    before the prompt's body) is theirs."""
    text = case["text"]
    assert announce_only(text)
    words = "thanks! and could you look at the docs too?"
    assert not announce_only(f"{text}\n\n{words}")
    assert not announce_only(f"{words}\n\n{text}")
    assert not announce_only(f"[Tue 2026-03-31 10:00 UTC] {words}\n\n{text}")


@pytest.mark.parametrize("case", by_family("room_event_line", "inter_session",
                                           "message_tool_key"), ids=lambda case: case["id"])
def test_texts_without_a_message_s_own_id_identify_nothing(case):
    """A room event's lines name other messages; another session's send carries none."""
    assert inbound_id(case["text"]) is None and announces(case["text"]) == []


def test_the_words_of_an_inbound_leave_out_openclaw_s_context():
    block = ('Conversation info (untrusted metadata):\n```json\n{\n  "message_id": "42",\n'
             '  "history_count": %d\n}\n```\n\nCan you check the deploy?')
    assert words_hash(block % 3) == words_hash(block % 7) == words_hash("Can you check the deploy?")
    assert words_hash(block % 3) != words_hash(block.replace("deploy", "build") % 3)


def test_a_wrapper_holding_several_queued_messages_has_no_single_id():
    text = ("[Queued messages while agent was busy]\n\n---\nQueued #1\nhi\n[message_id: 1]\n---\n"
            "Queued #2\nthere\n[message_id: 2]")
    assert inbound_id(text) is None
