"""The cleaning engine: one raw entry of one session in, its verdict out. No I/O, no clock."""

from __future__ import annotations

import json
import traceback
from typing import Final

from stream.engine.context import Context, Limits
from stream.engine.entry import Entry, MalformedEntry, parse, record_key
from stream.engine.kinds import MALFORMED_ENTRY
from stream.engine.records import (
    Action,
    Alert,
    DeadLetter,
    Origin,
    Verdict,
    alert_id,
)
from stream.engine.rules import (
    copies,
    correlation,
    heartbeat,
    identity,
    payload,
    repetition,
    replies,
    structure,
    tree,
    wakes,
)
from stream.engine.rules.drops import Drop, drop_alert
from stream.engine.state import (
    ASSISTANT,
    OTHER,
    ROLE_CODES,
    START_HEADER,
    START_PARTIAL,
    START_SEEN,
    START_UNKNOWN,
    TOOL_RESULT,
    USER,
    Session,
    source_hash,
)
from stream.engine.stored import E_CHILD, E_RELATED, E_RULE, E_SRC
from stream.engine.text import digest64

DROP_RULES: Final = copies.DROP_RULES


class Engine:
    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()

    def process(self, session: Session, raw: bytes, source: Origin) -> Verdict:
        """Decide one record. Reprocessing a record already processed from the same source
        (a restart after a crash) reproduces its verdict instead of calling it a duplicate."""
        origin, position = source.origin_digest(), source.position
        replay = session.state.is_replay(origin, position)
        if not replay:
            session.state.advance(origin, position)
        # `malformed` and `error` are two names: compiled, an `except` variable keeps the type of
        # its first clause, and another exception bound to it later fails that check and escapes.
        try:
            entry = parse(raw)
        except MalformedEntry as malformed:
            return dead_letter_verdict(session.id, raw, source, str(malformed))
        ctx = Context(session, entry, source, source_hash(origin, position), self.limits)
        try:
            verdict = self._replay(ctx) if replay else self._decide(ctx)
        except Exception as error:  # noqa: BLE001 - one bad record must not stop a partition
            return dead_letter_verdict(session.id, raw, source, _engine_error(error))
        verdict.alerts = ctx.alerts
        return verdict

    def _decide(self, ctx: Context) -> Verdict:
        entry, state = ctx.entry, ctx.state
        if entry.type == "session":
            if state.start == START_UNKNOWN:
                state.start = START_HEADER
            if entry.id is None:
                return Verdict(Action.KEPT, entry.raw)
        elif state.start == START_UNKNOWN:
            state.start = START_PARTIAL
            structure.seen_midway(ctx)
        elif state.start == START_HEADER:
            state.start = START_SEEN if entry.parent_id is None else START_PARTIAL
        state.seq += 1
        record = identity.entry_record(ctx)
        drop = identity.redelivery(ctx, record)
        if drop is None and record is None:
            drop = copies.find_copy(ctx)
        if drop is not None:
            # a copy is remembered under its own id; the entry itself again (delivered again,
            # or rewritten in place) already is
            if drop.related != entry.id:
                ctx.remember(
                    entry.record_key,
                    [
                        entry.fingerprint,
                        ctx.source_hash,
                        drop.rule.name,
                        drop.related,
                        tree.stand_in(ctx, drop),
                        None,
                    ],
                )
            drop_alert(ctx, drop)
            return Verdict(Action.DROPPED, drop_rule=drop.rule.name)
        if ctx.key_use is not None:
            ctx.key_use.apply(ctx)
        if ctx.identity_use is not None:
            ctx.identity_use.apply(ctx)
        verdict = self._keep(ctx, first_occurrence=record is None)
        if record is not None:
            # A conflicting version is kept, so it is part of its turn (a user one opens a turn).
            _advance_turn(ctx)
        return verdict

    def _keep(self, ctx: Context, first_occurrence: bool) -> Verdict:
        entry = ctx.entry
        # `named`: the record of the parent the entry names; `parent`: of the one it keeps.
        parent_id, parent = tree.output_parent(ctx)
        output = _output(ctx, parent_id)
        if not first_occurrence:
            return Verdict(Action.KEPT, output)
        named = ctx.parent_record()
        if entry.parent_id is not None:
            structure.dangling_parent(ctx, named)
        if parent_id == entry.parent_id:
            # A branch the input has; one made by re-parenting around a copy is not.
            structure.branch_fork(ctx, parent_id, parent)
        structure.tool_calls(ctx)
        replies.consecutive_assistant(ctx)
        replies.thinking_rejection_loop(ctx)
        replies.error_loop(ctx)
        replies.repetition_cascade(ctx)
        replies.retried_prompt(ctx)
        correlation.uncorrelated_mirror_copy(ctx)
        wakes.repeated_answer(ctx)
        if parent is not None and parent[E_CHILD] is None and _continues_branch(entry):
            parent[E_CHILD] = entry.id
            ctx.session.memory.put(record_key(parent_id), parent)
        elif parent_id is None and entry.type != "session" and _continues_branch(entry):
            tree.note_root(ctx)
        # The entry it stands beside (`rewrite_copy`): copies of that entry's children may hang
        # below it.
        beside = tree.chain_original(ctx) if entry.type != "leaf" else None
        if (entry.role == "assistant" and not entry.is_mirror and entry.reply_text_hash
                and ctx.indexes_identities):
            # a mirror that records no send of its own may repeat it anywhere later
            correlation.index_reply(ctx)
        if _is_final_reply(entry) and entry.reply_text_hash:
            # A mirror may name this reply later, or hang below it once the branch moved.
            ctx.remember(
                entry.record_key,
                [
                    entry.fingerprint,
                    ctx.source_hash,
                    None,
                    beside,
                    None,
                    None,
                    entry.reply_text_hash,
                ],
            )
        else:
            ctx.remember(
                entry.record_key, [entry.fingerprint, ctx.source_hash, None, beside, None, None]
            )
        payload.index_kept(ctx)
        _advance_turn(ctx)
        return Verdict(Action.KEPT, output)

    def _replay(self, ctx: Context) -> Verdict:
        """Rebuild the verdict of a record processed before, from what it left in memory."""
        entry = ctx.entry
        if entry.id is None:
            return Verdict(Action.KEPT, entry.raw)
        record = ctx.recall(entry.record_key)
        if record is None:
            # Forgotten (outside the window) or never written: keep it, as a new entry would be.
            return Verdict(Action.KEPT, entry.raw)
        if record[E_SRC] != ctx.source_hash:
            drop = identity.redelivery(ctx, record)
            if drop is not None:
                drop_alert(ctx, drop)
                return Verdict(Action.DROPPED, drop_rule=drop.rule.name)
            return self._keep(ctx, first_occurrence=False)
        if record[E_RULE] is not None:
            drop_alert(ctx, Drop(DROP_RULES[record[E_RULE]], record[E_RELATED]))
            return Verdict(Action.DROPPED, drop_rule=record[E_RULE])
        replies.repetition_cascade(ctx)
        return self._keep(ctx, first_occurrence=False)


def _continues_branch(entry: Entry) -> bool:
    """Whether the entry is a child in the tree's branch structure: an entry written beside
    the branch (`appendMode: "side"`) or a `leaf` control, which moves the branch, is not,
    and takes no entry's place as its first child."""
    return entry.type != "leaf" and not entry.is_side


def _output(ctx: Context, parent_id: str | None) -> bytes:
    """The entry as it leaves: byte for byte, unless it named a dropped entry as its parent
    (or, for a `leaf` control, as the entry it moves the branch to)."""
    entry = ctx.entry
    if parent_id == entry.parent_id and entry.type != "leaf":
        return entry.raw
    changes: dict[str, object] = {}
    if parent_id != entry.parent_id:
        changes["parentId"] = parent_id
    if entry.type == "leaf":
        for name in ("targetId", "appendParentId"):
            target = entry.value.get(name)
            if isinstance(target, str) and target:
                kept = tree.kept_in_place_of(ctx, target)
                if kept != target:
                    changes[name] = kept
    return _rewritten(entry, changes) if changes else entry.raw


def _advance_turn(ctx: Context) -> None:
    """Record a kept message as the newest of its turn; a user message opens a new turn. What
    only some rules read is theirs to keep (each module's `open_turn` and `note_reply`); the
    latest message and reply are every rule's."""
    entry, state = ctx.entry, ctx.state
    if entry.message is None:
        return
    role = ROLE_CODES.get(entry.role or "", OTHER)
    if role == USER:
        _open_turn(ctx)
    elif role == TOOL_RESULT:
        replies.note_tool_result(state)
    state.last_role = role
    # Only an assistant's text is ever compared with what follows (`cli_mirror_duplicate`):
    # tool results, often the longest texts, are not normalized or hashed at all.
    state.last_text_hash = entry.text_hash if role == ASSISTANT else 0
    state.last_id = entry.id
    repetition.note_message(state, entry, role == ASSISTANT)
    if role != ASSISTANT:
        return
    if not entry.is_mirror:
        if not replies.note_reply(state, entry):
            heartbeat.note_reply(state, entry)
        correlation.note_reply(ctx)
    if entry.text_hash:
        state.latest_is_mirror = entry.is_mirror
        state.latest_text_hash = entry.text_hash if entry.is_mirror else entry.reply_text_hash
        state.latest_text_id = entry.id
        state.latest_mirrored = not entry.is_mirror and entry.mirror_identity is not None


def _open_turn(ctx: Context) -> None:
    state, entry = ctx.state, ctx.entry
    # what the turn before answered, read before its state is reset
    earlier_hash, earlier_id = heartbeat.previous_answer(state)
    state.start_turn()
    repetition.open_turn(state)
    replies.open_turn(state, entry)
    structure.open_turn(state)
    correlation.open_turn(ctx)
    heartbeat.open_turn(state, entry, earlier_hash, earlier_id, ctx.limits.heartbeat_prompt)
    wakes.open_turn(state, entry, earlier_hash, earlier_id)


def _is_final_reply(entry: Entry) -> bool:
    """A model reply that ends its run: what channel-final mirrors deliver. Only these
    remember their text (a hash) for the mirrors that come after other entries; one that
    calls tools is compared while it is the turn's latest reply, from the turn state."""
    return entry.role == "assistant" and not entry.is_mirror and not entry.has_tool_calls


def _rewritten(entry: Entry, changes: dict[str, object]) -> bytes:
    # Re-read with the stdlib: orjson reads integers beyond 64 bits as floats (or not at all),
    # and the rest of the entry must pass on unchanged.
    value = json.loads(entry.raw)
    value.update(changes)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate escape: keep it escaped
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def _engine_error(error: Exception) -> str:
    # The exception's own text may quote the entry; its type and place are enough to debug.
    frame = traceback.extract_tb(error.__traceback__)[-1]
    return f"engine error: {type(error).__name__} in {frame.name} ({frame.lineno})"


def dead_letter_verdict(session_id: str, raw: bytes, source: Origin, reason: str) -> Verdict:
    letter = DeadLetter(session_id, source, reason, raw)
    alert = _malformed_alert(session_id, raw, source, reason)
    return Verdict(Action.DEAD_LETTERED, alerts=[alert], dead_letter=letter)


def _malformed_alert(session_id: str, raw: bytes, source: Origin, reason: str) -> Alert:
    return Alert(
        id=alert_id(session_id, MALFORMED_ENTRY.name, None, f"{digest64(raw):x}"),
        kind=MALFORMED_ENTRY.name,
        severity=MALFORMED_ENTRY.severity,
        session_id=session_id,
        entry_id=None,
        related_entry_id=None,
        action=MALFORMED_ENTRY.action,
        message=f"dead-lettered a record of {len(raw)} bytes: {reason}",
        evidence={"reason": reason, "bytes": len(raw)},
        source=source,
    )
