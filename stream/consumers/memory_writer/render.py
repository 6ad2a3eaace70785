"""A session's memory file, in the markdown of OpenClaw's own memory: its header of session
facts, then one markdown line per transcript entry said.

    # Session: 2026-12-01 19:16:30 UTC

    - **Session Key**: agent:main:main
    - **Session ID**: 0c4e9163-2c40-4265-ab6e-a52f5dd1cd99
    - **Agent**: main
    - **Reason**: reset
    - **Previous Session**: [a1b2c3](a1b2c3.md)

    ## Conversation

    user: what changed?
    assistant: Two files. The first one
      continues here, indented by two spaces;

      an empty line inside a message stays empty.
    assistant (delivered): the text the gateway sent

    ### 2026-12-02

    user: the next day's first message

The header is the one OpenClaw's bundled session-memory hook writes (`# Session:`, the
`- **Session Key**` / `- **Session ID**` list, `- **Reason**` for a reset or rollover), with
what the source's record headers say of the session (agent, key, the session it follows and
why) as they were when its first line was written; a line `### YYYY-MM-DD` opens each later
day (UTC) of the conversation.

One message is one *line* of the file: a `role: ` head line plus its continuation lines
(every line of the text after the first, indented by two spaces), not session-memory's
`role: "<JSON-quoted text>"`: memory-core's full-text index (FTS5, unicode61) reads a quoted
line break `\\n` as part of the next word, so the first word of every later line of a
message would not be found (`\\nsecond` is the token, not `second`). Its chunker
(`chunkMarkdown`: ~1600-character windows of whole lines, with overlap) cuts between lines,
and a line of ours is a line of the text (a longer one cut at spaces, below), so a chunk holds
whole lines of what was said.

Only user and assistant messages with visible text are written; a transcript-only mirror
(what the gateway delivered, not a model reply) as `assistant (delivered): ...`. Tool
results, custom entries and every other entry type are not written.

The writer renders; the engine decides. Whether an entry repeats another is the engine's
verdict alone: the clean topic holds what it kept, and every kept message with visible text is
written here, whatever it repeats. A second, weaker copy filter here would hide the
engine's misses from the raw-vs-clean comparison and from the tests that count doubled lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from stream.engine.entry import Entry
from stream.engine.text import normalize

USER, ASSISTANT, DELIVERED = "user", "assistant", "assistant (delivered)"
LABELS = (f"{USER}: ", f"{ASSISTANT}: ", f"{DELIVERED}: ")
INDENT = "  "
# The longest line written: a quarter of memory-core's chunk window (400 tokens, 4 weighted
# characters each), as a CJK character weighs up to 4 (`estimateStringChars`).
WRAP = 400
CONVERSATION = "## Conversation"
DAY_HEADING = "### "
# What a source knows of the session beyond its id, in the input records' headers
# (stream.sources.store.reader), forwarded by the worker to the clean topic.
AGENT_HEADER, KEY_HEADER = "openclaw-agent-id", "openclaw-session-key"
PREVIOUS_HEADER, REASON_HEADER = "openclaw-previous-session-id", "openclaw-window-reason"
# Control characters and line breaks: a header value is one line of the list, always.
_BREAKS = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")


@dataclass(frozen=True)
class SessionFacts:
    """What the header of a session's file says: from the session id, the record headers of
    its first written line and that line's time."""

    session_id: str
    session_key: str | None = None
    agent_id: str | None = None
    previous_session_id: str | None = None
    reason: str | None = None
    started: datetime | None = None

    @classmethod
    def of(cls, session_id: str, headers: dict[str, str], started: datetime | None
           ) -> SessionFacts:
        return cls(session_id, headers.get(KEY_HEADER), headers.get(AGENT_HEADER),
                   headers.get(PREVIOUS_HEADER), headers.get(REASON_HEADER), started)


def render_header(facts: SessionFacts, file_name: Callable[[str], str]) -> str:
    """The head of a new memory file, through its `## Conversation` heading and a blank line.

    `file_name` names a session's file, for the link to the session this one follows.
    """
    title = _time(facts.started) if facts.started else _one_line(facts.session_id) or '""'
    items = [("Session Key", facts.session_key), ("Session ID", facts.session_id),
             ("Agent", facts.agent_id)]
    # "initial" is every conversation's first window: nothing to say.
    if facts.reason and facts.reason != "initial":
        items.append(("Reason", facts.reason))
    lines = [f"# Session: {title}", ""]
    lines += [f"- **{name}**: {_one_line(value)}" for name, value in items if value]
    if facts.previous_session_id:
        previous = _one_line(facts.previous_session_id)
        lines.append(f"- **Previous Session**: [{previous}]"
                     f"({file_name(facts.previous_session_id)}.md)")
    return "\n".join([*lines, "", CONVERSATION, ""]) + "\n"


def render_day(day: str) -> str:
    """The heading that opens a later day of the conversation."""
    return f"\n{DAY_HEADING}{day}\n\n"


def entry_time(entry: Entry) -> datetime | None:
    """When the entry was written: its `timestamp` (ISO 8601), else its message's (ms)."""
    stamp = entry.value.get("timestamp")
    if isinstance(stamp, str):
        try:
            parsed = datetime.fromisoformat(stamp)
        except ValueError:
            parsed = None
        if parsed is not None:
            return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    millis = entry.field("timestamp")
    if isinstance(millis, (int, float)) and not isinstance(millis, bool) and millis > 0:
        try:
            return datetime.fromtimestamp(millis / 1000, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def day_of(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d")


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _one_line(value: str) -> str:
    return _BREAKS.sub(" ", value).strip()


def render(entry: Entry) -> str | None:
    """The markdown line of `entry` (ending in a newline), or None when it is not written."""
    if entry.role == USER:
        label = USER
    elif entry.role == ASSISTANT:
        label = DELIVERED if entry.is_mirror else ASSISTANT
    else:
        return None  # toolResult, custom, session header, model changes, ...
    text = entry.visible_text.strip()
    if not text:
        return None  # tool calls only, an error or an abort: nothing was said
    first, *rest = [piece for line in text.splitlines() for piece in _wrapped(line.rstrip())]
    # Continuation lines are indented so that every line that starts a message starts with
    # its role. Trailing whitespace is dropped: invisible, and a hard break to markdown.
    lines = [f"{label}: {first}"]
    lines += [INDENT + line if line.strip() else "" for line in rest]
    return "\n".join(lines) + "\n"


def _wrapped(line: str) -> list[str]:
    """`line` cut at spaces into pieces of at most WRAP characters (a longer word stays
    whole). memory-core's chunker cuts a line longer than its window (1600 weighted
    characters) wherever the window ends, inside a word, and the index then knows neither
    half; a line this short is never cut."""
    pieces = []
    while len(line) > WRAP:
        cut = line.rfind(" ", 0, WRAP + 1)
        if cut <= 0:
            cut = line.find(" ", WRAP)
            if cut < 0:
                break
        pieces.append(line[:cut].rstrip())
        line = line[cut:].lstrip()
    return [*pieces, line]


def split_lines(markdown: str) -> list[str]:
    """The lines of a memory file: each head line with its continuation lines."""
    lines: list[str] = []
    for physical in markdown.split("\n"):
        if physical and not physical[0].isspace():
            lines.append(physical)
        elif lines:
            lines[-1] += "\n" + physical
    return [line.rstrip("\n") for line in lines]


def message_lines(markdown: str) -> list[str]:
    """The messages of a memory file (its header and day headings left out)."""
    return [line for line in split_lines(markdown) if line.startswith(LABELS)]


def last_day(markdown: str) -> str | None:
    """The day (UTC) of the file's latest message that had a time, as its headings say."""
    for line in reversed(markdown.split("\n")):
        for head in ("# Session: ", DAY_HEADING):
            if line.startswith(head) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", line[len(head):][:10]):
                return line[len(head):][:10]
    return None


def line_text(line: str) -> str:
    """The normalized text of one line, without its `role: ` label."""
    return normalize(line.partition(": ")[2])
