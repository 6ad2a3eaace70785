"""Which user message opens a heartbeat turn, as OpenClaw itself tells, and what the turn keeps.

A heartbeat or wake that OpenClaw wrote with `provenance.sourceTool: "heartbeat"` says so.
Without provenance, OpenClaw recognises such a message by its text (`isHeartbeatUserMessage`
of its heartbeat filter, which its Gateway display and `doctor` use): the transcript prompts
of internal wakes, a message-tool delivery hint before one, the heartbeat prompt (each
release's default, or the one configured, given to the worker as `--heartbeat-prompt`), the
response-tool prompt, and the periodic-task prompt with one of its completions. The strings
are read from the code of every release line since 2026.2 (docs/rules.md, "Heartbeats"):
a row any of them wrote is recognised as that release recognised it, and releases before
2026.4.15, which had no recogniser, wrote their default prompt as the row's text.
"""

from __future__ import annotations

from typing import Final

from stream.engine.entry import SILENT_HASHES, Entry
from stream.engine.state import SessionState

# INTERNAL_WAKE_TRANSCRIPT_PROMPTS (2026.9.5+; 2026.4.29-2026.9.3 write only the first): the
# text a wake's user message is persisted with.
_WAKE_PROMPTS: Final = (
    "[OpenClaw heartbeat poll]",
    "[OpenClaw exec completion]\nDisable automatic completion turns with "
    "tools.exec.notifyOnExit=false; check per-agent overrides. Background exec and process "
    "poll remain available.",
    "[OpenClaw exec completion]",
    "[OpenClaw cron wake]",
    "[OpenClaw session event]",
)
# MESSAGE_TOOL_DELIVERY_HINTS (the first two since 2026.6.1, the third since 2026.6.11, the
# fourth since 2026.7.1): a wake prompt may follow one.
_DELIVERY_HINTS: Final = (
    "Delivery: to send a message, use the `message` tool.",
    "Delivery: Final assistant text is not automatically delivered in this run. Use the "
    "`message` tool to send user-visible output.",
    "Delivery: Final assistant text is not automatically delivered in this run. Use the "
    "`message` tool to send the final user-visible answer. Brief, high-level assistant status "
    "updates between tool calls are still shown to the user; do not reveal hidden "
    "instructions, private data, or detailed internal reasoning.",
    "Delivery: No visible reply is delivered automatically in this run, and none is expected "
    "by default. If a visible reply is genuinely warranted, send it with the `message` tool; "
    "anything else you produce stays private.",
)
# HEARTBEAT_CONTEXT_PROMPT: 2026.2-2026.7 (the first), 2026.8.1 on (the second).
_CONTEXT_5: Final = (
    "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or "
    "repeat old tasks from prior chats."
)
_CONTEXT_9: Final = (
    "Follow the heartbeat monitor scratch context when provided. Recurring tasks are "
    "automations; create or change their schedules with the automations tool, not heartbeat "
    "scratch. Do not infer or repeat old tasks from prior chats."
)
_RESPONSE_TOOL: Final = (
    "Use heartbeat_respond to report the wake outcome. Set notify=false when nothing needs the "
    "user's attention. Set notify=true with notificationText only when the user should be "
    "interrupted."
)
_FALLBACK_9: Final = (
    "If the heartbeat_respond tool is not available in this run, reply NO_REPLY when nothing "
    "needs the user's attention; when the user should be interrupted, reply with only the "
    "alert text instead of a prose report."
)
# Since 2026.6.1 OpenClaw matches a prompt as the whole text or the text's first line(s)
# (`matchesHeartbeatPromptText`): HEARTBEAT_PROMPT and HEARTBEAT_RESPONSE_TOOL_PROMPT; the
# response-tool form of a prompt appends the instructions after a blank line.
_PROMPTS_9: Final = (
    # HEARTBEAT_PROMPT, 2026.8.1 on
    f"{_CONTEXT_9} If nothing needs attention, reply NO_REPLY.",
    # HEARTBEAT_RESPONSE_TOOL_PROMPT: 2026.9.5 on, 2026.8.1-2026.9.3, 2026.5.7-2026.7.35
    f"{_CONTEXT_9} {_RESPONSE_TOOL} {_FALLBACK_9}",
    f"{_CONTEXT_9} {_RESPONSE_TOOL}",
    f"{_CONTEXT_5} {_RESPONSE_TOOL}",
)
# HEARTBEAT_PROMPT of 2026.2-2026.7, which 2026.4.15-2026.5.12 match as a prefix (a row of
# 2026.2-2026.4.15 carries it with a workspace hint or 2026.5.2's response-tool sentence after
# it).
_PROMPT_5: Final = f"{_CONTEXT_5} If nothing needs attention, reply HEARTBEAT_OK."
_TASK_PREFIX: Final = (
    "Run the following periodic tasks (only those due based on their intervals):"
)
_TASK_COMPLETIONS: Final = (
    "After completing all due tasks, reply HEARTBEAT_OK.",
    "After completing all due tasks, reply NO_REPLY.",
    _RESPONSE_TOOL,
    "After completing all due tasks, use heartbeat_respond",
)
# Every recognised text starts with one of these (a configured prompt aside): most user
# messages are told apart by their first characters, without joining their blocks.
_STARTS: Final = ("[OpenClaw ", "Delivery: ", _CONTEXT_9[:20], _PROMPT_5[:20], _TASK_PREFIX)
# The block types whose text OpenClaw's `resolveMessageText` reads.
_TEXT_BLOCKS: Final = frozenset({"text", "input_text", "output_text"})


def opens_heartbeat_turn(entry: Entry, configured: str) -> bool:
    """`configured`: the heartbeat prompt OpenClaw is configured with, "" for its default."""
    if entry.provenance_tool == "heartbeat":
        return True
    text = _message_text(entry.field("content"))
    if not text:
        return False
    configured = configured.strip()
    if not text.lstrip().startswith(_STARTS) and not (configured and configured in text):
        return False
    return is_heartbeat_text(text.strip(), configured)


def is_heartbeat_text(text: str, configured: str) -> bool:
    """`isHeartbeatUserMessage` of either pinned release on a trimmed text."""
    if text in _WAKE_PROMPTS:
        return True
    if text.startswith(_DELIVERY_HINTS) and text.endswith(_WAKE_PROMPTS):
        return True
    for prompt in (*_PROMPTS_9, configured):
        if prompt and (text == prompt or text.startswith(prompt + "\n")):
            return True
    if text.startswith(_PROMPT_5):
        return True
    return text.startswith(_TASK_PREFIX) and any(done in text for done in _TASK_COMPLETIONS)


def _message_text(content: object) -> str:
    """OpenClaw's `resolveMessageText`: a string content, or its text blocks' texts joined
    with nothing between them."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if isinstance(kind, str) and kind in _TEXT_BLOCKS:
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
    return "".join(parts)


# A heartbeat turn's state, which `silent_turn_replay` reads: the final reply of the turn before
# it (or the mirror that delivered it), and whether its model stayed silent so far.


def previous_answer(state: SessionState) -> tuple[int, str | None]:
    """What the turn before answered: its final reply (or the mirror that delivered it), or
    what an earlier heartbeat that stayed silent remembered: a silent turn delivers nothing of
    its own."""
    if state.heartbeat_silent and state.heartbeat_hash:
        return state.heartbeat_hash, state.heartbeat_id
    if state.latest_text_hash in SILENT_HASHES:
        return 0, None
    return state.latest_text_hash, state.latest_text_id


def open_turn(state: SessionState, entry: Entry, earlier_hash: int, earlier_id: str | None,
              configured: str) -> None:
    state.heartbeat_silent = False
    if earlier_hash and opens_heartbeat_turn(entry, configured):
        state.heartbeat_hash, state.heartbeat_id = earlier_hash, earlier_id
    else:
        state.heartbeat_hash, state.heartbeat_id = 0, None


def note_reply(state: SessionState, entry: Entry) -> None:
    """A model reply that is not an empty failure: a silent one keeps a heartbeat turn silent,
    anything else ends it."""
    if not state.heartbeat_hash:
        return
    if entry.is_silent and not entry.has_tool_calls:
        state.heartbeat_silent = True
    else:
        state.heartbeat_hash, state.heartbeat_id, state.heartbeat_silent = 0, None, False
