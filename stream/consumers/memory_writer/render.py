"""One transcript entry to one markdown line of a session's memory file.

    user: what changed?
    assistant: Two files. The first one
      continues here, indented by two spaces;

      an empty line inside a message stays empty.
    assistant (delivered): the text the gateway sent

One message is one *line* of the file: a `role: ` head line plus its continuation lines (every
line of the text after the first, indented by two spaces). Only user and assistant messages
with visible text are written; a transcript-only mirror (what the gateway delivered, not a
model reply) as `assistant (delivered): ...`. Tool results, custom entries and every other
entry type are not written.

The writer renders; the engine decides. Whether an entry repeats another is the engine's
verdict alone: the clean topic holds what it kept, and every kept message with visible text is
written here, whatever it repeats. A second, weaker copy filter here would hide the
engine's misses from the raw-vs-clean comparison and from the tests that count doubled lines.
"""

from __future__ import annotations

from stream.engine.entry import Entry
from stream.engine.text import normalize

USER, ASSISTANT, DELIVERED = "user", "assistant", "assistant (delivered)"
INDENT = "  "


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
    first, *rest = text.splitlines()
    # Continuation lines are indented so that every line that starts a message starts with
    # its role. Trailing whitespace is dropped: invisible, and a hard break to markdown.
    lines = [f"{label}: {first.rstrip()}"]
    lines += [INDENT + line.rstrip() if line.strip() else "" for line in rest]
    return "\n".join(lines) + "\n"


def split_lines(markdown: str) -> list[str]:
    """The lines (messages) of a memory file: each head line with its continuation lines."""
    lines: list[str] = []
    for physical in markdown.split("\n"):
        if physical and not physical[0].isspace():
            lines.append(physical)
        elif lines:
            lines[-1] += "\n" + physical
    return [line.rstrip("\n") for line in lines]


def line_text(line: str) -> str:
    """The normalized text of one line, without its `role: ` label."""
    return normalize(line.partition(": ")[2])
