"""Evidence: the same message persisted twice. A copy keeps its original's payload byte for byte
(its `message`, stamped with a numeric `message.timestamp`, or a compaction's fields) under a
new id; where it hangs says whether a genuine second message could carry that payload:
`rewrite_copy` and `persisted_copy`.

A rule of this evidence is a function `(ctx) -> Drop | None` that `find` tries in order; its
`DropRule` goes into `RULES` at the same place.

`rewrite_copy`, an entry re-appended under a new id where a rewrite put its copy:

OpenClaw rewrites a transcript by branching (#115310): an overflow recovery or a compaction
appends the edited entry beside the one it replaces, then every later entry of the branch
again, under new ids and parents, each `message` as it was. The originals stay, earlier in the
stream. A reader that follows the stream line by line would read the copied turns twice.

A copy is recognised by where it hangs and what it carries, never by text alone: its parent
stands for the original's parent (it is the original's parent, or an entry kept beside it, or
a copy dropped in its place), the original is that parent's first kept child, and the copy's
payload (its `message` byte for byte, stamped with a time, or a compaction's fields) is the
original's. The copy then stands in for the original: what hangs below it is re-parented there.
"""

from __future__ import annotations

from typing import Final

from stream.engine import kinds
from stream.engine.context import Context
from stream.engine.entry import Entry, payload_of, record_key
from stream.engine.rules.drops import Drop, DropRule
from stream.engine.rules.tree import chain_original
from stream.engine.stored import E_FP, E_RULE, PAYLOAD

REWRITE_COPY: Final[DropRule] = DropRule(
    kinds.REWRITE_COPY,
    "re-appended by a transcript rewrite, same payload as entry",
    lambda entry: {"payload": f"{entry.payload:08x}", "type": entry.type},
    stands_in=True,
)


def rewrite_copy(ctx: Context) -> Drop | None:
    payload = ctx.entry.payload
    if not payload:
        return None
    original = chain_original(ctx)
    if original is None:
        return None
    record = ctx.recall(record_key(original))
    if record is None or record[E_RULE] is not None:
        return None
    fingerprint = record[E_FP]
    if isinstance(fingerprint, int) and payload_of(fingerprint) == payload:
        return Drop(REWRITE_COPY, original)
    return None


# `persisted_copy`: the same message persisted again anywhere in the session. A user message
# carries the millisecond it was received: nobody sends two at the same millisecond, so the same
# millisecond and the same words are the same message written twice (a prompt replayed after an
# idle-timeout abort, #95766 and #128472; a line of user turns re-appended after a compaction,
# #66443 and #72511; a release that rewrites the envelope around the words, which is why the
# words are compared and not the payload). A compaction carries its summary, `tokensBefore` and
# the boundary it keeps (`firstKeptEntryId`): two with all of them equal compacted the same
# context, a clone (a genuine second compaction has another boundary or count, #127436). Replies
# are not indexed by payload: a reply is known by its provider's response id (rules/identities),
# and without one only its placement (`rewrite_copy`) tells a rewrite's copy from a second model
# call.
PERSISTED_COPY: Final[DropRule] = DropRule(
    kinds.PERSISTED_COPY,
    "the same message persisted again, same payload as entry",
    lambda entry: {"payload": f"{entry.payload:08x}", "type": entry.type},
    stands_in=True,
)


def _indexed(entry: Entry) -> bool:
    return entry.payload_digest != 0 and (entry.role == "user" or entry.type == "compaction")


def _boundary(entry: Entry) -> str:
    """The compaction's `firstKeptEntryId` ("" for none, or for a message)."""
    kept = entry.value.get("firstKeptEntryId") if entry.type == "compaction" else None
    return kept if isinstance(kept, str) else ""


def _slot(ctx: Context) -> str:
    """Where a kept message's payload is remembered. A user message is known by the millisecond
    it was received and the person's words (the text without OpenClaw's context blocks): a
    prompt OpenClaw rendered again keeps both (#72012: 2026.4.24 rewrote each submitted prompt
    without its sender block beside the first). One without a millisecond, and every message in
    state format 3, is known by its bytes whole."""
    entry = ctx.entry
    stamp = entry.field("timestamp")
    if entry.role != "user" or not ctx.indexes_identities or type(stamp) is not int:
        return f"{PAYLOAD}{entry.payload_digest:x}"
    return PAYLOAD + str(entry.words_digest ^ stamp)


def persisted_copy(ctx: Context) -> Drop | None:
    entry = ctx.entry
    if not _indexed(entry):
        return None
    seen = ctx.recall(_slot(ctx))
    if seen is None or seen[1] == entry.id or seen[2] != _boundary(entry):
        return None
    return Drop(PERSISTED_COPY, seen[1])


def index_kept(ctx: Context) -> None:
    """A kept user message or compaction: what a copy of it would be compared with."""
    entry = ctx.entry
    if _indexed(entry):
        ctx.remember(_slot(ctx), [entry.id, _boundary(entry)])


def find(ctx: Context) -> Drop | None:
    """The first rule that finds the entry's payload persisted before."""
    return rewrite_copy(ctx) or persisted_copy(ctx)


RULES: Final[tuple[DropRule, ...]] = (REWRITE_COPY, PERSISTED_COPY)
