"""Evidence: the same message carries the same identity. A copy carries the identities of the
entry it copies, wherever it lands; each one is read from OpenClaw's own code, release by
release (docs/rules.md, "Identities"):

- a reply's `responseId`, the provider's id of one model call (written since 2026.3.22);
- a reply's tool call ids where the provider names its calls once (`toolu_…`, `call_…`): a
  provider that numbers them per response (`functions.exec:0`) repeats them every turn;
- a tool result's `toolCallId`, within the reply that issued the call: raw ids repeat, so the id
  alone is no identity (2026.9.6 renames repeats by occurrence when it replays history);
- the channel's own id of an inbound message, with its route (`__openclaw.transport`, 2026.8+).

A run's id (`__openclaw.runId`) is on every row of its run: a scope, not an identity.

The same identity with the same message (the message without its own timestamp, as OpenClaw's
replay compares them: `Entry.same_message`) is a copy wherever it hangs: it is dropped and
takes its original's place. The same identity with another message is kept and reported
(`identity_conflict`): a split row, an id reused, or a failed attempt that its retry repeats.

A rule of this evidence is the `DropRule` of one identity kind in `RULES`; `find` tries the
entry's identities in the order of the kinds.
"""

from __future__ import annotations

from typing import Final

from stream.engine import inbound_text, kinds
from stream.engine.context import Context
from stream.engine.entry import Entry
from stream.engine.rules.drops import Drop, DropRule
from stream.engine.stored import (
    ANNOUNCE,
    IDENTITY_VERSION,
    INBOUND,
    INBOUND_TEXT,
    RESPONSE,
    TOOL_CALL,
    TOOL_RESULT,
)

SAME_RESPONSE: Final[DropRule] = DropRule(
    kinds.SAME_RESPONSE,
    "the provider's response persisted again, as entry",
    lambda entry: {"response_id": entry.response_id, "digest": _digest(entry)},
    stands_in=True,
)
SAME_TOOL_CALLS: Final[DropRule] = DropRule(
    kinds.SAME_TOOL_CALLS,
    "a reply issuing the same tool calls persisted again, as entry",
    lambda entry: {"tool_call_ids": own_call_ids(entry), "digest": _digest(entry)},
    stands_in=True,
)
SAME_TOOL_RESULT: Final[DropRule] = DropRule(
    kinds.SAME_TOOL_RESULT,
    "the result of the same call persisted again, as entry",
    lambda entry: {"tool_call_id": entry.tool_call_id, "digest": _digest(entry)},
    stands_in=True,
)
SAME_ANNOUNCE: Final[DropRule] = DropRule(
    kinds.SAME_ANNOUNCE,
    "the same completion announced again, as entry",
    lambda entry: {"sessions": len(inbound_text.announces(entry.visible_text))},
    stands_in=True,
)
SAME_INBOUND: Final[DropRule] = DropRule(
    kinds.SAME_INBOUND,
    "the channel's inbound message delivered again, as entry",
    lambda entry: {"digest": _digest(entry)},
    stands_in=True,
)
RULES: Final[tuple[DropRule, ...]] = (
    SAME_RESPONSE,
    SAME_TOOL_CALLS,
    SAME_TOOL_RESULT,
    SAME_INBOUND,
    SAME_ANNOUNCE,
)

# Its memory keys and their values are stored.py's (format 4): a message's digest and stamp are
# `Entry.message_token` (a stamped message's payload digest and stamp, an unstamped one's digest
# and None); a reply's tool calls live in structure's `TOOL_CALL` records.

# The ids providers give a call once are long: Anthropic's `toolu_` and OpenAI's `call_` ids
# carry 24 random characters, OpenAI's `fc_` more, Gemini's its name and the millisecond. The
# ids a provider numbers per response are short (a word and an index: `call_0`), or OpenClaw's
# `NATIVE_KIMI_TOOL_CALL_ID_RE` (`functions.<name>:<n>`), which may be long.
_SHORTEST_OWN_CALL_ID: Final = 16
_NUMBERED_PREFIX: Final = "functions."


def own_call_ids(entry: Entry) -> list[str]:
    """The reply's tool call ids that name their call once (see the module's docstring)."""
    return [call_id for call_id in entry.tool_call_ids
            if len(call_id) >= _SHORTEST_OWN_CALL_ID
            and not call_id.startswith(_NUMBERED_PREFIX)]


class IdentityUse:
    """What the entry's identities leave behind, applied only if it is kept (a dropped entry
    leaves no trace, or cleaning a cleaned session would differ): the slots to remember it
    under, and the identities it shares with another message (rare: made when met)."""

    __slots__ = ("conflicts", "slots", "versions")

    def __init__(self) -> None:
        # (slot, what a copy must repeat: 0 for the message itself, else a hash)
        self.slots: list[tuple[str, int]] = []
        self.versions: list[str] | None = None
        self.conflicts: list[tuple[str, str]] | None = None  # (identity kind, entry id)

    def remember(self, slot: str, compared: int) -> None:
        self.slots.append((slot, compared))

    def conflict(self, version: str, kind: str, earlier: str) -> None:
        if self.versions is None or self.conflicts is None:
            self.versions, self.conflicts = [], []
        self.versions.append(version)
        if (kind, earlier) not in self.conflicts:
            self.conflicts.append((kind, earlier))

    def apply(self, ctx: Context) -> None:
        entry = ctx.entry
        digest, stamp = entry.message_token if self.slots else (0, None)
        for slot, compared in self.slots:
            ctx.remember(slot, [compared, None, entry.id] if compared else
                         [digest, stamp, entry.id])
        if self.versions is None or self.conflicts is None:
            return
        for slot in self.versions:
            ctx.remember(slot, [entry.id])
        for kind, earlier in self.conflicts:
            ctx.alert(
                kinds.IDENTITY_CONFLICT,
                f"kept {entry.id}: its {kind} identity was seen on entry {earlier} with "
                "another message",
                evidence={"identity": kind, "digest": f"{entry.message_token[0]:016x}"},
                related=earlier,
                discriminator=f"{kind}\x00{earlier}",
            )


class Identity:
    """One identity of the entry: the rule of its kind, its memory slot, and what a copy must
    repeat: the message (`compared` 0: by its payload and stamp, `Entry.same_message`) or a
    hash of what the identity's text reports (`compared`)."""

    __slots__ = ("compared", "is_call", "rule", "slot")

    def __init__(self, rule: DropRule, slot: str, compared: int = 0,
                 is_call: bool = False) -> None:
        self.rule = rule
        self.slot = slot
        self.compared = compared
        # a reply's tool call, whose record structure.tool_calls writes
        self.is_call = is_call


def identities(ctx: Context) -> list[Identity]:
    """The entry's identities, but the announces its text holds (`announced`)."""
    entry = ctx.entry
    found: list[Identity] = []
    if entry.role == "assistant" and not entry.is_mirror:
        response_id = entry.response_id
        if response_id is not None:
            found.append(Identity(SAME_RESPONSE, RESPONSE + response_id))
        for call_id in own_call_ids(entry):
            found.append(Identity(SAME_TOOL_CALLS, TOOL_CALL + call_id, is_call=True))
    elif entry.role == "toolResult" and entry.tool_call_id is not None:
        call_id = entry.tool_call_id
        issuer = ctx.recall(TOOL_CALL + call_id)
        issued_by = issuer[1] if issuer is not None else ""
        found.append(Identity(SAME_TOOL_RESULT, f"{TOOL_RESULT}{issued_by}\x00{call_id}"))
    elif entry.role == "user":
        inbound = entry.inbound_identity
        if inbound is not None:
            found.append(Identity(SAME_INBOUND, INBOUND + inbound))
        else:
            for written, words in inbound_text.inbound_messages(entry.visible_text):
                found.append(Identity(SAME_INBOUND, INBOUND_TEXT + written, words))
    return found


def find(ctx: Context) -> Drop | None:
    """A copy of a message remembered under one of the entry's identities; a kept entry leaves
    its identities in `ctx.identity_use`, for the engine to apply once it is kept."""
    if not ctx.indexes_identities:
        return None
    entry = ctx.entry
    found = identities(ctx)
    reports = inbound_text.announces(entry.visible_text) if entry.role == "user" else []
    if not found and not reports:
        return None
    use = IdentityUse()
    # a wrapper of queued messages is a copy only when each of them is one
    each = len(found) > 1 and entry.role == "user"
    copied: list[str] = []
    for identity in found:
        record = ctx.recall(identity.slot)
        earlier, digest, stamp = _earlier(record, identity.is_call)
        if earlier is None or earlier == entry.id:
            if not identity.is_call:
                use.remember(identity.slot, identity.compared)
            continue
        if not digest:
            continue  # remembered before the index: nothing to compare with
        if (digest == identity.compared) if identity.compared else entry.same_message(digest,
                                                                                       stamp):
            if not each:
                return Drop(identity.rule, earlier, True)
            copied.append(earlier)
            continue
        token = identity.compared or entry.message_token[0]
        version = f"{IDENTITY_VERSION}{identity.slot}\x00{token:x}"
        kept = ctx.recall(version)
        if kept is not None and kept[1] != entry.id:
            if not each:
                return Drop(identity.rule, kept[1], True)
            copied.append(kept[1])
            continue
        use.conflict(version, _kind(identity.rule), earlier)
    if each and len(copied) == len(found):
        return Drop(SAME_INBOUND, copied[0], True)
    if reports:
        drop = _announced_again(ctx, reports, use)
        if drop is not None:
            return drop
    ctx.identity_use = use
    return None


def _announced_again(ctx: Context, reports: list[tuple[str, int]],
                     use: IdentityUse) -> Drop | None:
    """Every completion the entry announces was announced before, reporting the same, and the
    entry holds nothing else: a copy of the first entry that announced them, whatever wrapper
    each came in. A persistent child's next run names the same session and reports otherwise: a
    completion of its own; a person's words beside the announce are theirs."""
    earlier: list[str] = []
    for session, report in reports:
        slot = f"{ANNOUNCE}{session}\x00{report:x}"
        record = ctx.recall(slot)
        if record is None or record[3] == ctx.entry.id:
            use.remember(slot, report)
        else:
            earlier.append(record[3])
    if len(earlier) == len(reports) and inbound_text.announce_only(ctx.entry.visible_text):
        return Drop(SAME_ANNOUNCE, earlier[0], True)
    return None


def _earlier(record: list | None, is_call: bool) -> tuple[str | None, int, object]:
    """The entry an identity's record names, and its message's digest and stamp (digest 0:
    not remembered, as in a tool call record a version before the identity index wrote)."""
    if record is None:
        return None, 0, None
    if is_call:
        if len(record) < 4 or not isinstance(record[2], int):
            return record[1], 0, None
        return record[1], record[2], record[3]
    return record[3], record[1], record[2]


def _kind(rule: DropRule) -> str:
    return rule.name.removeprefix("same_")


def _digest(entry: Entry) -> str:
    return f"{entry.message_token[0]:016x}"
