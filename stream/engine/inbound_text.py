"""Identities OpenClaw wrote inside a message's text before it had fields for them, release by
release (docs/rules.md, "Identities"). Each pattern was read from the release's own template
and tested against strings its template functions make (tests/engine/test_inbound_text.py).

- The channel's id of an inbound message: a trailing `[message_id: <id>]` line (2026.1.30-2.1;
  the last one is the message's: group history lines carry other messages' ids), a leading one
  (Feishu, 2026.3.31-8.2), or the `Conversation info` block OpenClaw writes before the words
  (2026.2.26-4.15 and 2026.5.12 in the user row; 2026.4.29-5.7 and 2026.9.3+ in the runtime
  context entry written after it), whose `message_id`, `chat_id` and `topic_id` locate the
  message. The block's other keys (history counts, mention facts, the time as text) change
  between two deliveries of one message: a copy is compared by the person's words.
- A background task's completion announced to the session that started it: the child session's
  key and id (its stats line's `sessionKey … • sessionId …` in 2026.1.30-2.12, `[System
  Message] [sessionId: …]` in 2026.2.17-2.26; `session_key:`/`session_id:`
  lines since 2026.3.8). They name the child session, not the run, so a second run of a
  persistent child carries them too: a copy is compared by what the announce reports (its
  status, task and result, its stats), never by the wrapper it was delivered in.
"""

from __future__ import annotations

import json
import re
from typing import Final

from stream.engine.text import digest64, normalized_utf8

_MESSAGE_ID_LINE: Final = re.compile(
    r"(?mi)^[ \t]*\[message_id:[ \t]*([^\]\r\n]*?)[ \t]*\][ \t]*\r?$")
# a row holding queued messages holds each one's id in a section of its own
_QUEUED: Final = re.compile(r"^\s*\[Queued (?:announce )?messages while agent was busy\]")
_QUEUED_SECTION: Final = re.compile(r"(?m)^---\r?\nQueued #\d+[^\r\n]*\r?\n")
# OpenClaw's internal context serialized into a prompt (2026.8+): its text, not the person's
_INTERNAL_BEGIN: Final = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"
_INTERNAL_CONTEXT: Final = re.compile(
    _INTERNAL_BEGIN + r"[\s\S]*?<<<END_OPENCLAW_INTERNAL_CONTEXT>>>")
# the delivery time the gateway puts before a prompt (`injectTimestamp`)
_STAMP: Final = r"\[[^\]\r\n]*\d{4}-\d{2}-\d{2} \d{2}:\d{2}[^\]\r\n]*\]"
_GATEWAY_TIME: Final = r"(?:" + _STAMP + r" )?"
_CONVERSATION_INFO: Final = re.compile(
    r"(?m)^Conversation info(?: \(untrusted metadata\):|: \u27e6openclaw:ctx\u27e7)[ \t]*\r?\n"
    r"[ \t]*```json[ \t]*\r?\n([\s\S]*?)\r?\n[ \t]*```[ \t]*\r?$")
_ROUTE_KEYS: Final = ("chat_id", "topic_id", "message_id")
# OpenClaw's context blocks before the words: `<label> (untrusted …):` or `<label>: ⟦openclaw:ctx⟧`
# and a fenced JSON body
_CONTEXT_BLOCK: Final = re.compile(
    r"(?m)^[^\r\n]*(?:\(untrusted[^\r\n]*\):|\u27e6openclaw:ctx\u27e7)[ \t]*\r?\n"
    r"[ \t]*```json[ \t]*\r?\n[\s\S]*?\r?\n[ \t]*```[ \t]*\r?$")
_ANNOUNCE_EVENT: Final = re.compile(
    r"(?m)^(?:\[Internal task completion event\]|A background task completed\. Use this "
    r"result to reply to the user in your normal assistant voice\.\r?\n)\r?\n?"
    r"source: [^\r\n]*\r?\nsession_key: ([^\r\n]*)\r?\nsession_id: ([^\r\n]*)\r?\n"
    r"type: [^\r\n]*\r?\ntask: [^\r\n]*\r?\nstatus: [^\r\n]*\r?$")
_ANNOUNCE_2_26: Final = re.compile(
    r"(?m)^" + _GATEWAY_TIME + r"\[System Message\] \[sessionId: ([^\]\r\n]*)\] A .+? \".*\" just "
    r"(?:completed successfully|timed out|failed: [^\r\n]*|finished with unknown status)")
_STATS: Final = re.compile(r"(?m)^Stats: [^\r\n]*$")
_SYSTEM_MESSAGE: Final = "[System Message]"
# Before the system message form: `A background task "…" just …` (2026.1.30-2.1), `A subagent
# task`/`A cron job "…" just …` (2026.2.12), delivered alone or as a section of the
# queued-announce wrapper; the identity is in the stats line after the findings (the last one
# before the next announce)
_ANNOUNCE_1_30: Final = re.compile(
    r'(?m)^' + _GATEWAY_TIME + r'(A (?:background task|subagent task|cron job) ".*" just )')
_QUEUED_ANNOUNCES: Final = re.compile(
    _GATEWAY_TIME + r"\[Queued announce messages while agent was busy\]")
_STATS_1_30: Final = re.compile(
    "(?m)^Stats: (?:[^\r\n]*? \u2022 )?sessionKey (\\S+)(?: \u2022 sessionId (\\S+))?"
    "(?: \u2022 transcript [^\r\n]+)?\r?$")
# the child's own output, which could hold a block of the same shape: not searched for one
_UNTRUSTED: Final = re.compile(
    r"<<<BEGIN_UNTRUSTED_CHILD_RESULT>>>[\s\S]*?<<<END_UNTRUSTED_CHILD_RESULT>>>"
    r"|<prompt-data>[\s\S]*?</prompt-data>")
# OpenClaw's own lines around the announces it delivers (`buildCollectPrompt`'s queue wrapper,
# the legacy runtime-context header, `annotateInterSessionPromptText`'s inter-session header)
# and the gateway's delivery time: what `announce_only` takes for framing; then the label
# before an event's instruction (`formatTaskCompletionEvent`) and the paragraphs an announce's
# end is found by
_FRAMING_LINE: Final = re.compile(
    r"(?m)^[ \t]*(?:\[Queued announce messages while agent was busy\]|---|Queued #\d+"
    r"|OpenClaw runtime context \(internal\):"
    r"|This context is runtime-generated, not user-authored\. Keep internal details private\."
    r"|\[Inter-session message\] [^\r\n]*"
    r"|This content was routed by OpenClaw from another session or internal tool\.[^\r\n]*"
    r")[ \t]*\r?$")
_LINE_TIME: Final = re.compile(r"(?m)^[ \t]*" + _STAMP + r" ?")
_INSTRUCTION_LABEL: Final = re.compile(r"\r?\n[ \t]*\r?\n(?:Action|Instruction):[ \t]*\r?\n")
_PARAGRAPH_BREAK: Final = re.compile(r"\r?\n[ \t]*\r?\n")
_PARAGRAPH_START: Final = re.compile(r"(?:[ \t]*\r?\n)+")
# A text longer than this is compared by its last _WORDS_KEPT characters (`words_digest`).
_WORDS_READ: Final = 4096
_WORDS_KEPT: Final = 1024
# cheap looks before a pattern runs: most user messages hold none of these
_INBOUND_HINTS: Final = ("[message_id:", "Conversation info")
_ANNOUNCE_HINTS: Final = ("session_id: ", "[sessionId: ", "sessionKey ")


def inbound_messages(text: str) -> list[tuple[str, int]]:
    """The inbound messages the text renders, each (its channel id with what of its route the
    text holds, a hash of its words): one, or each of the queued messages a wrapper holds; none
    when one of them names no id (a wrapper is then no copy of anything)."""
    if not any(hint in text for hint in _INBOUND_HINTS):
        return []
    if not _QUEUED.match(text):
        found = inbound_id(text)
        return [(found, words_hash(text))] if found is not None else []
    sections = _QUEUED_SECTION.split(text)[1:]
    messages = [(inbound_id(section), words_hash(section)) for section in sections]
    return [(found, words) for found, words in messages if found is not None] \
        if sections and all(found is not None for found, _ in messages) else []


def inbound_id(text: str) -> str | None:
    """The channel's id of the inbound message the text renders, with what of its route the
    text holds: a `Conversation info` block's, a leading `[message_id:` line's (Feishu), or the
    last such line's."""
    if not any(hint in text for hint in _INBOUND_HINTS):
        return None
    info = _CONVERSATION_INFO.search(text)
    if info is not None:
        found = _route(info.group(1))
        if found is not None:
            return found
    if _QUEUED.match(text):
        return None
    ids = _MESSAGE_ID_LINE.findall(text)
    if not ids:
        return None
    return "line\x00" + (ids[0] if text.lstrip().startswith("[message_id:") else ids[-1])


def _route(block: str) -> str | None:
    try:
        facts = json.loads(block)
    except ValueError:
        return None
    if not isinstance(facts, dict) or facts.get("message_id") in (None, ""):
        return None
    return "info\x00" + "\x00".join(str(facts.get(key) or "") for key in _ROUTE_KEYS)


def has_context(text: str) -> bool:
    """The text may hold OpenClaw's context blocks or ids (a look before a pattern runs)."""
    return "untrusted" in text or "\u27e6openclaw:ctx\u27e7" in text or "[message_id:" in text \
        or _INTERNAL_BEGIN in text


def words_digest(text: str) -> int:
    """The end of a message's words without OpenClaw's context blocks, byte for byte: what two
    renderings of one message (the same millisecond) share. Context blocks come before the
    words, so a long text's last characters are words; only they are read."""
    if len(text) > _WORDS_READ:
        text = text[-_WORDS_KEPT:]
    if has_context(text):
        text = _without_context(text)
    data = text.strip()[-_WORDS_KEPT:].encode("utf-8", "surrogatepass")
    return digest64(data) | 1 if data else 0


def _without_context(text: str) -> str:
    words = _MESSAGE_ID_LINE.sub("", _CONTEXT_BLOCK.sub("", text))
    if _INTERNAL_BEGIN in words:
        words = _INTERNAL_CONTEXT.sub("", words)
    return words


def words_hash(text: str) -> int:
    """The person's words of an inbound: the text without OpenClaw's context blocks, internal
    context and `[message_id:` lines, normalized."""
    data = normalized_utf8(_without_context(text))
    return digest64(data) | 1 if data else 0


def announces(text: str) -> list[tuple[str, int]]:
    """Each completion announced in the text: (the child session it names, a hash of what it
    reports: from its first line through its stats line)."""
    if not any(hint in text for hint in _ANNOUNCE_HINTS):
        return []
    found: list[tuple[str, int]] = []
    cleaned = _UNTRUSTED.sub("", text) if "<" in text else text
    for match in _ANNOUNCE_EVENT.finditer(cleaned):
        # from its `source:` line on: the line before it says how it was delivered (inline in
        # a yielded turn, or a deferred announce), not what it reports
        start = text.find(match.group(0)) + match.group(0).find("source: ")
        found.append((f"{match.group(1)}\x00{match.group(2)}", _report_hash(text, start)))
    for match in _ANNOUNCE_2_26.finditer(cleaned):
        # from the system message on: the time before it is the delivery's
        start = text.find(_SYSTEM_MESSAGE, text.find(match.group(0)))
        found.append((f"\x00{match.group(1)}", _report_hash(text, start)))
    if not found:
        found = _announces_1_30(text)
    return found


def announce_only(text: str) -> bool:
    """Whether the text holds nothing but its announces and OpenClaw's framing of them.

    OpenClaw puts a completion event before the body of the prompt it rides on
    (`prependInternalEventContext`, `resolveAcpPromptBody`): a person's words beside an announce
    make the row theirs, never a copy. OpenClaw's own parts: its internal context blocks, each
    announce from its first line through its stats line, and the one paragraph of instruction
    after it (the paragraph after an `Action:` or `Instruction:` label, as OpenClaw's
    `findLegacyInternalEventEnd` reads an event's end; the paragraph after the stats line in the
    releases before the events), and the framing lines above."""
    rest = _INTERNAL_CONTEXT.sub("", text) if _INTERNAL_BEGIN in text else text
    if "<" in rest:
        rest = _UNTRUSTED.sub("", rest)
    starts = sorted([(match.start(), True) for match in _ANNOUNCE_EVENT.finditer(rest)]
                    + [(match.start(), False) for pattern in (_ANNOUNCE_2_26, _ANNOUNCE_1_30)
                       for match in pattern.finditer(rest)])
    kept: list[str] = []
    cut = 0
    for index, (start, is_event) in enumerate(starts):
        if start < cut:
            continue
        limit = starts[index + 1][0] if index + 1 < len(starts) else len(rest)
        kept.append(rest[cut:start])
        cut = _announce_end(rest, start, limit, is_event)
    kept.append(rest[cut:])
    return not _FRAMING_LINE.sub("", _LINE_TIME.sub("", "".join(kept))).strip()


def _announce_end(text: str, start: int, limit: int, is_event: bool) -> int:
    """Where the announce that starts at `start` ends, the next one starting at `limit`."""
    label = _INSTRUCTION_LABEL.search(text, start, limit)
    if label is not None:
        return _paragraph_end(text, label.end(), limit)
    stats = [match.end() for match in _STATS.finditer(text, start, limit)]
    if not stats:
        return start  # no end to go by: the announce is taken for words
    if is_event:
        return stats[-1]
    after = _PARAGRAPH_START.match(text, stats[-1], limit)
    return _paragraph_end(text, after.end(), limit) if after is not None else stats[-1]


def _paragraph_end(text: str, start: int, limit: int) -> int:
    found = _PARAGRAPH_BREAK.search(text, start, limit)
    return found.start() if found is not None else limit


def _announces_1_30(text: str) -> list[tuple[str, int]]:
    """The row is the announce, or the queued-announce wrapper with one in each section: an
    announce quoted inside a person's message announces nothing."""
    alone = _ANNOUNCE_1_30.match(text)
    if alone is not None:
        starts = [alone.start(1)]
    elif _QUEUED_ANNOUNCES.match(text):
        starts = [match.start(1) for match in _ANNOUNCE_1_30.finditer(text)]
    else:
        return []
    found: list[tuple[str, int]] = []
    for start, end in zip(starts, [*starts[1:], len(text)], strict=True):
        stats = _STATS_1_30.findall(text, start, end)
        if stats:
            key, session_id = stats[-1]
            found.append((f"{key}\x00{session_id}", _report_hash(text, start)))
    return found


def _report_hash(text: str, start: int) -> int:
    stats = _STATS.search(text, start)
    end = stats.end() if stats is not None else len(text)
    return digest64(normalized_utf8(text[start:end])) | 1
