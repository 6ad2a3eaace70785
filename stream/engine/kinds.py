"""Every alert the engine raises, drop rules and detections alike: the one registry of kinds.

A kind is raised only through its definition here (`Context.alert` takes an `AlertKind`), so
no kind goes unregistered. The alert schema's kind enum and per-kind constraints
(schemas/alert.schema.json) and the catalogue tables of docs/rules.md are generated from these
definitions (`python -m stream.catalogue --write`), and tests hold the committed files equal to
what they generate. A new kind is defined here, in the group of the evidence it reads; a drop
rule's definitions stand in the order its rules are tried (tests/test_catalogue.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from stream.engine.records import Action, Severity

# The evidence a kind reads: the module of stream/engine/rules/ that raises it (`input`: the
# engine's parse of a record).
IDENTITY: Final = "identity"
KEYS: Final = "keys"
IDENTITIES: Final = "identities"
PAYLOAD: Final = "payload"
CORRELATION: Final = "correlation"
REPETITION: Final = "repetition"
REPLIES: Final = "replies"
STRUCTURE: Final = "structure"
WAKES: Final = "wakes"
INPUT: Final = "input"

# What an alert names: an entry (`entry_id`), the session (no entry: its `related_entry_id` is
# the entry that raised it), or a record that is no entry (dead-lettered).
ENTRY: Final = "entry"
SESSION: Final = "session"
RECORD: Final = "record"


@dataclass(frozen=True, slots=True)
class Field:
    """One evidence field an alert of a kind always carries, with its JSON schema."""

    name: str
    description: str
    schema: dict


def text(name: str, description: str) -> Field:
    return Field(name, description, {"type": "string"})


def maybe_text(name: str, description: str) -> Field:
    return Field(name, description, {"type": ["string", "null"]})


def hex64(name: str, description: str) -> Field:
    return Field(name, description, {"type": "string", "pattern": "^[0-9a-f]{16}$"})


def hex32(name: str, description: str) -> Field:
    return Field(name, description, {"type": "string", "pattern": "^[0-9a-f]{8}$"})


def flag(name: str, description: str) -> Field:
    return Field(name, description, {"type": "boolean"})


def count(name: str, description: str, minimum: int | None = None) -> Field:
    schema: dict = {"type": "integer"}
    if minimum is not None:
        schema["minimum"] = minimum
    return Field(name, description, schema)


@dataclass(frozen=True, slots=True)
class AlertKind:
    name: str
    severity: Severity
    action: Action
    # the evidence it reads (IDENTITY, KEYS, ...)
    family: str
    # one line: the schema's list of kinds
    description: str
    # exactly when it is raised, and what it leaves alone: docs/rules.md's catalogue
    definition: str
    # what the alert's fields name: the schema's constraints of the kind
    alert: str
    evidence: tuple[Field, ...]
    about: str = ENTRY
    # a second severity and the evidence flag that raises the alert to it
    raised: tuple[Severity, str] | None = None

    def severity_of(self, escalated: bool) -> Severity:
        if escalated and self.raised is not None:
            return self.raised[0]
        return self.severity


REDELIVERY: Final = AlertKind(
    "redelivery",
    Severity.INFO,
    Action.DROPPED,
    IDENTITY,
    description="the same entry, id and bytes, delivered again",
    definition="an entry whose `id` was seen in the session with the same bytes. Same id, "
               "other bytes: kept, `entry_id_conflict` (warning), as for the rows OpenClaw's "
               "display projection makes of one message (#134705: a text-only "
               "`openclawStreamFallback` row and the thinking and tool calls without the text,"
               " one id, `responseId` and timestamp), neither of which repeats the other. The "
               "same source record processed again (same file+line, same "
               "topic/partition/offset) is a replay, not a redelivery: it gives the same "
               "output again.",
    alert="The entry's `id` was already seen in this session with the same whole-entry "
          "fingerprint (a redelivered line). `related_entry_id` is the entry's own id.",
    evidence=(
        hex64("fingerprint", "64-bit hash (16 hex digits) of the entry's exact bytes."),
    ),
)

REWRITTEN_IN_PLACE: Final = AlertKind(
    "rewritten_in_place",
    Severity.INFO,
    Action.DROPPED,
    IDENTITY,
    description="the entry itself again, rewritten in place with facts added",
    definition="the entry itself again with other bytes, where its idempotency key still names"
               " it with the same role and content: OpenClaw 2026.8+ rewrites a row where it "
               "is (`rewriteTranscriptMessageAtAnchor`: the Codex prompt's mirror identity "
               "since 2026.9.1, a steer's target run) and the store sources send it again. "
               "Without a key, or with other words: kept, `entry_id_conflict`",
    alert="The entry itself again with other bytes, its idempotency key still naming it with "
          "the same role and content: a row OpenClaw rewrote in place "
          "(`rewriteTranscriptMessageAtAnchor`). `related_entry_id` is the entry's own id.",
    evidence=(
        text("fingerprint", "The entry's fingerprint, 16 hex digits."),
        text("idempotency_key", "The key that names the entry."),
    ),
)

ENTRY_ID_CONFLICT: Final = AlertKind(
    "entry_id_conflict",
    Severity.WARNING,
    Action.KEPT,
    IDENTITY,
    description="an id seen before with other bytes",
    definition="an entry whose `id` was seen in the session with other bytes (and that is not "
               "`rewritten_in_place`): kept, as are the rows OpenClaw's display projection "
               "makes of one message (#134705), neither of which repeats the other; each "
               "conflicting version is remembered, so its own redelivery is a `redelivery`",
    alert="The entry's `id` was seen before with different content. `related_entry_id` is the "
          "reused id.",
    evidence=(
        hex64("fingerprint", "64-bit hash (16 hex digits) of this entry's bytes."),
        hex64(
            "first_fingerprint",
            "64-bit hash (16 hex digits) of the bytes first seen under the id.",
        ),
    ),
)

IDEMPOTENT_REPLAY: Final = AlertKind(
    "idempotent_replay",
    Severity.INFO,
    Action.DROPPED,
    KEYS,
    description="an input delivered again under its idempotency key",
    definition="a message whose `idempotencyKey` (or `__openclaw.idempotencyKey`) was seen "
               "with the same role+content fingerprint. Same key, other content: kept, "
               "`idempotency_key_collision` (warning). Positional keys (`…:user:N`, "
               "`…:assistant:N`, `…:toolResult:N`) are identified by scope + role + content, "
               "so a re-mirrored turn whose snapshot shifted loses nothing and doubles "
               "nothing; `positional_idempotency_key` (info) once per session that uses them. "
               "An inbound user turn enrolled twice (#115389, #116409: a sibling of the "
               "original, same key) or delivered twice (#126680), and a prompt the harness "
               "replays under its key after an idle timeout (#95766), are such replays, and so"
               " is the inbound a fallback-tainted turn re-runs (#149430; the sends it made "
               "again are kept). A key is looked up among messages of the entry's role, as "
               "OpenClaw's writer does (`scan-assistant`): a run's reply may carry its user "
               "turn's key, which the user row keeps owning (#154253: thousands of user + "
               "empty `stopReason:\"error\"` pairs under one key are one pair). A user copy "
               "stands in for its original: the reply to a second delivery hangs below the "
               "original, where no rule takes it for the first reply's receipt or echo",
    alert="A message whose idempotency identity was seen in this session with the same content"
          " fingerprint. `related_entry_id` is the first message with it.",
    evidence=(
        text(
            "idempotency_key",
            "The idempotency key (from `idempotencyKey` or legacy "
            "`__openclaw.idempotencyKey`).",
        ),
        flag(
            "positional",
            "Whether the key is positional (`scope:role:N`), so identity is scope + role + "
            "content fingerprint.",
        ),
    ),
)

ANNOUNCE_RETRY_DUPLICATE: Final = AlertKind(
    "announce_retry_duplicate",
    Severity.INFO,
    Action.DROPPED,
    KEYS,
    description="a retried announce delivery repeating its first attempt",
    definition="a message whose key is a subagent announce or settle-wake key with a retry "
               "suffix, whose first attempt (the key without `:retry-N`) was kept with the "
               "same role+content fingerprint (#121187, #153417). OpenClaw's grammar "
               "(2026.9.6): `announce:<base>[:yield-N]` (`buildAnnounceIdempotencyKey`), "
               "`…:retry-N` for a retry of the same delivery; that key is the run id of the "
               "turn it starts, whose user message is keyed `<runId>:user` "
               "(`buildRunUserTurnIdempotencyKey`) and whose aborted partial "
               "`<runId>:assistant`, so `…:retry-N:user` repeats `…:user`. Other content, "
               "another batch (`:yield-2`), other delivery paths (`:active-wake`), another "
               "role suffix, other key families: kept",
    alert="A subagent announce or settle-wake delivery retried under its first attempt's "
          "idempotency key with a `:retry-N` suffix, with the first attempt's role and content"
          " (#121187, #153417). `related_entry_id` is the first attempt.",
    evidence=(
        text("idempotency_key", "The retried delivery's key (`announce:…:retry-N`)."),
    ),
)

CODEX_PROMPT_MIRROR: Final = AlertKind(
    "codex_prompt_mirror",
    Severity.INFO,
    Action.DROPPED,
    KEYS,
    description="a run's prompt written again by its other writer",
    definition="a run's prompt written by both of its writers (#141233): the HTTP API's user "
               "row, keyed only under `__openclaw`, and the Codex transcript mirror's, keyed "
               "`codex-app-server:<threadId>:<turnId>:prompt` (`attachCodexMirrorIdentity`; "
               "its dedupe reads only top-level keys), in either order: the later, directly "
               "after the earlier (both are written before the run's first reply), when its "
               "role+content fingerprint is that of that keyed user message and exactly one of"
               " the two is a Codex prompt key. It stands in for the row kept. Two Codex "
               "prompts with the same words (two runs), the same words after a reply (a "
               "channel run has only the mirror's row), a turn opened by an unkeyed message, "
               "other content: kept",
    alert="A run's prompt written by both of its writers (#141233), the HTTP API's row keyed "
          "under `__openclaw` and the Codex mirror's keyed "
          "`codex-app-server:…:<turnId>:prompt`; the later is dropped. `related_entry_id` is "
          "the row kept.",
    evidence=(
        text("idempotency_key", "The dropped row's idempotency key."),
    ),
)

IDEMPOTENCY_KEY_COLLISION: Final = AlertKind(
    "idempotency_key_collision",
    Severity.WARNING,
    Action.KEPT,
    KEYS,
    description="an idempotency key reused with other content",
    definition="a message whose idempotency key a kept message of its role carries with "
               "another role+content fingerprint (positional keys shifted after a snapshot, a "
               "key reused): kept",
    alert="An idempotency key reused with different content (e.g. positional keys shifted "
          "after a snapshot). `related_entry_id` is the entry that used the key first.",
    evidence=(
        text(
            "idempotency_key",
            "The idempotency key (from `idempotencyKey` or legacy "
            "`__openclaw.idempotencyKey`).",
        ),
        flag(
            "positional",
            "Whether the key is positional (`scope:role:N`), so identity is scope + role + "
            "content fingerprint.",
        ),
    ),
)

POSITIONAL_IDEMPOTENCY_KEY: Final = AlertKind(
    "positional_idempotency_key",
    Severity.INFO,
    Action.KEPT,
    KEYS,
    description="the session uses positional idempotency keys",
    definition="the first message of a session keyed with a positional key (`…:user:N`, "
               "`…:assistant:N`, `…:toolResult:N`): such keys shift when a snapshot changes, "
               "so they are read as scope + role + content; once per session",
    alert="The session uses positional idempotency keys (`scope:role:N`); raised once per "
          "session, on the first such message.",
    evidence=(
        text("idempotency_key", "The first positional key seen in the session."),
    ),
    about=SESSION,
)

SAME_RESPONSE: Final = AlertKind(
    "same_response",
    Severity.INFO,
    Action.DROPPED,
    IDENTITIES,
    description="a provider's response persisted again",
    definition="an assistant whose `responseId` (a provider's id of one model call, written "
               "since 2026.3.22) a kept reply of the session carries, with the same message "
               "digest ([Identities](#identities)): a reply persisted again anywhere (#85937 "
               "below itself, #73119 from the root, a rewrite's suffix, after a restore). The "
               "same id with another message: kept, `identity_conflict`",
    alert="A reply whose provider `responseId` a kept reply carries, with the same message "
          "digest: the same model call's reply persisted again, wherever it hangs. "
          "`related_entry_id` is the kept reply.",
    evidence=(
        text("response_id", "The provider's response id both carry."),
        text(
            "digest",
            "The entry's message digest (its `message` without its own `timestamp`), 16 hex "
            "digits.",
        ),
    ),
)

SAME_TOOL_CALLS: Final = AlertKind(
    "same_tool_calls",
    Severity.INFO,
    Action.DROPPED,
    IDENTITIES,
    description="a reply issuing the same tool calls persisted again",
    definition="an assistant issuing a tool call whose id the provider names once (not "
               "`functions.<name>:<n>` or a word and a small index, which providers renumber "
               "every response) that a kept reply issued, with the same message digest. "
               "Another message under the same call ids (a failed row and its retry, #65924): "
               "kept, `identity_conflict`",
    alert="A reply issuing tool calls under ids the provider names once, which a kept reply "
          "issued, with the same message digest. `related_entry_id` is the kept reply.",
    evidence=(
        Field(
            "tool_call_ids",
            "The reply's tool call ids that identify it.",
            {"type": "array", "items": {"type": "string"}},
        ),
        text(
            "digest",
            "The entry's message digest (its `message` without its own `timestamp`), 16 hex "
            "digits.",
        ),
    ),
)

SAME_TOOL_RESULT: Final = AlertKind(
    "same_tool_result",
    Severity.INFO,
    Action.DROPPED,
    IDENTITIES,
    description="the result of the same tool call persisted again",
    definition="a tool result answering the same call of the same reply (`toolCallId` within "
               "the kept reply that issued it) as a kept result, with the same message digest "
               "(#58608: a result persisted twice after an interrupted run). A result for a "
               "call a later reply issued again under a renumbered id answers that reply: kept",
    alert="A tool result answering the same call of the same reply as a kept result, with the "
          "same message digest. `related_entry_id` is the kept result.",
    evidence=(
        text("tool_call_id", "The call it answers."),
        text(
            "digest",
            "The entry's message digest (its `message` without its own `timestamp`), 16 hex "
            "digits.",
        ),
    ),
)

SAME_INBOUND: Final = AlertKind(
    "same_inbound",
    Severity.INFO,
    Action.DROPPED,
    IDENTITIES,
    description="a channel's inbound message delivered again",
    definition="a user message whose channel message id and route (`__openclaw.transport`: "
               "channel, conversation, message id, 2026.8+) a kept user message carries, with "
               "the same message digest; or whose text names that id "
               "([Identities](#identities)) with the same words: the channel's inbound "
               "delivered again (#58443, #30574, #83521, #119907)",
    alert="A user message carrying the channel's id of an inbound message, with its route, "
          "that a kept user message carries, with the same message digest: the inbound "
          "delivered again. `related_entry_id` is the kept message.",
    evidence=(
        text(
            "digest",
            "The entry's message digest (its `message` without its own `timestamp`), 16 hex "
            "digits.",
        ),
    ),
)

SAME_ANNOUNCE: Final = AlertKind(
    "same_announce",
    Severity.INFO,
    Action.DROPPED,
    IDENTITIES,
    description="the same completion announced again",
    definition="a user message every completion of which (each child session it names, with "
               "what it reports) a kept message announced, and that holds nothing else but "
               "OpenClaw's framing of them: the same completion announced again, however "
               "wrapped or delivered (#17122, #20202, #125797). A person's words beside the "
               "announce (OpenClaw puts an event before the prompt it rides on): kept",
    alert="A user message every completion of which (the child session it names, with what it "
          "reports) a kept message announced, however wrapped or delivered, holding nothing "
          "else. `related_entry_id` is the first entry that announced them.",
    evidence=(
        count("sessions", "How many completions the message announces."),
    ),
)

IDENTITY_CONFLICT: Final = AlertKind(
    "identity_conflict",
    Severity.WARNING,
    Action.KEPT,
    IDENTITIES,
    description="an identity seen before with another message",
    definition="a kept entry carries an identity ([Identities](#identities)) a kept entry of "
               "the session carries with another message: a split row, an id reused, or a "
               "failed attempt that its retry repeats; evidence: `identity` (`response`, "
               "`tool_calls`, `tool_result`, `inbound`), the entry's message `digest`; "
               "`related_entry_id` the earlier entry",
    alert="A kept entry carrying an identity (a response id, tool call ids, a tool result's "
          "call, an inbound's channel id) that a kept entry carries with another message: a "
          "split row, an id reused, or a failed attempt that its retry repeats. "
          "`related_entry_id` is the earlier entry.",
    evidence=(
        Field(
            "identity",
            "Which identity the two entries share.",
            {"type": "string", "enum": ["response", "tool_calls", "tool_result", "inbound"]},
        ),
        text(
            "digest",
            "The entry's message digest (its `message` without its own `timestamp`), 16 hex "
            "digits.",
        ),
    ),
)

REWRITE_COPY: Final = AlertKind(
    "rewrite_copy",
    Severity.INFO,
    Action.DROPPED,
    PAYLOAD,
    description="an entry a transcript rewrite appended again",
    definition="an entry a transcript rewrite appended again under a new id (#89387; since "
               "#115310 overflow recovery and compaction branch and re-append): its payload is"
               " that of the entry it stands beside, which is the first kept child of what its"
               " parent stands for (its parent itself, an entry kept beside that entry's "
               "original, or a copy dropped in its place). The copy stands in for its "
               "original: what hangs below it is re-parented there, and the rewritten entry (a"
               " truncated tool result) is kept beside its original. An entry that hangs at "
               "the root in the output stands beside the session's first kept root, so a "
               "branch written again from the root (#73119: `sessions_history` re-writing "
               "every earlier message with fresh ids) is a rewrite's; that holds as well for "
               "one re-parented there around a dropped copy, which cleaning the output again "
               "would see parentless. Byte-identical payloads elsewhere (a reply below its "
               "twin without a `responseId`, an unstamped message) are kept",
    alert="An entry a transcript rewrite (overflow recovery, compaction: #89387, #115310) "
          "appended again under a new id, where the copy of its original's parent hangs, with "
          "the original's payload (its `message` byte for byte, stamped with a time; a "
          "compaction's fields). `related_entry_id` is the original; what hangs below the copy"
          " is re-parented to it.",
    evidence=(
        hex32(
            "payload",
            "32-bit digest (8 hex digits) of the payload the copy and the original share.",
        ),
        text("type", "The copy's entry type (`message` or `compaction`)."),
    ),
)

PERSISTED_COPY: Final = AlertKind(
    "persisted_copy",
    Severity.INFO,
    Action.DROPPED,
    PAYLOAD,
    description="a user message or compaction persisted again",
    definition="a user message with the millisecond it was received and the words of one "
               "already kept in the session (within the id window), or a compaction with its "
               "payload: nobody sends two messages in one millisecond, so the same millisecond"
               " and words are the same message persisted again (a prompt replayed after an "
               "idle-timeout abort, #95766, #128472; user turns re-appended in a line after a "
               "compaction, #66443, #72511; a prompt 2026.4.24 rendered a second time without "
               "its sender block, #72012). The words are the text without OpenClaw's context "
               "blocks, compared byte for byte (a text over 4,096 characters by its last "
               "1,024: the context comes first); a user message without a numeric `timestamp` "
               "is compared by its whole payload; a compaction's also needs the same "
               "`firstKeptEntryId` (a clone, each below the previous one; a genuine second "
               "compaction has another boundary or `tokensBefore`, #127436). The copy stands "
               "in for its original, so what hangs below it (the rest of the line) is "
               "`rewrite_copy`'s. Replies are not compared this way: OpenClaw replays two "
               "identical adjacent replies as two model turns; a person typing the same words "
               "again has a new timestamp: kept",
    alert="A user message or a compaction already kept in the session (a user message's "
          "numeric timestamp and words, without OpenClaw's context blocks, or its `message` "
          "byte for byte without a numeric timestamp: a prompt replayed after an idle-timeout "
          "abort, #95766, #128472, user turns re-appended after a compaction, #66443, #72511, "
          "a prompt rendered again without its sender block, #72012; a compaction's fields and"
          " the same `firstKeptEntryId`: a clone). `related_entry_id` is the original; what "
          "hangs below the copy is re-parented to it.",
    evidence=(
        hex32(
            "payload",
            "32-bit digest (8 hex digits) of the payload the copy and the original share.",
        ),
        text("type", "The copy's entry type (`message` or `compaction`)."),
    ),
)

SILENT_TURN_REPLAY: Final = AlertKind(
    "silent_turn_replay",
    Severity.WARNING,
    Action.DROPPED,
    CORRELATION,
    description="the previous reply committed again in a silent heartbeat turn",
    definition="a transcript-only mirror in a heartbeat turn whose model replies so far are "
               "all silent (no tool calls), whose text equals the previous turn's final reply,"
               " or the mirror that delivered it (#143787: the last final reply committed "
               "again seconds after a heartbeat's `NO_REPLY`); never with media. A heartbeat "
               "that replied with words, a silent reply outside a heartbeat turn, a mirror "
               "before the silent reply: kept",
    alert="A transcript-only mirror in a heartbeat turn whose model stayed silent (`NO_REPLY`,"
          " `HEARTBEAT_OK`), repeating the previous turn's final reply (#143787). "
          "`related_entry_id` is that reply, or the mirror that delivered it.",
    evidence=(
        hex64(
            "text_hash",
            "64-bit hash (16 hex digits) of the entry's normalized visible text; equal hashes "
            "mean equal text.",
        ),
        text("role", "The dropped message's role."),
        maybe_text("model", "The mirror's model; null when absent."),
    ),
)

DELIVERY_MIRROR_DUPLICATE: Final = AlertKind(
    "delivery_mirror_duplicate",
    Severity.INFO,
    Action.DROPPED,
    CORRELATION,
    description="a transcript-only mirror repeating a reply",
    definition="a transcript-only mirror whose text equals the final text of a model reply of "
               "its turn that it repeats, chosen by the correlation the mirror carries "
               "(below); never when either carries media. Mirrors with new text are real "
               "outbound messages and are kept",
    alert="A transcript-only mirror repeating the final text of a model reply of its turn: the"
          " reply it names as its source, a latest reply that declares it is mirrored (for a "
          "mirror naming only its own send), else the turn's latest assistant with text or the"
          " kept reply its parentId names. `related_entry_id` is that reply (or, for an "
          "unkeyed replay, the earlier mirror it repeats).",
    evidence=(
        hex64(
            "text_hash",
            "64-bit hash (16 hex digits) of the entry's normalized visible text; equal hashes "
            "mean equal text.",
        ),
        text("role", "The dropped message's role (`assistant`)."),
        maybe_text(
            "model",
            "The mirror's model (`delivery-mirror`, `gateway-injected`, or another model when "
            "marked by `openclawDeliveryMirror.kind`); null when absent.",
        ),
    ),
)

UNCORRELATED_MIRROR_COPY: Final = AlertKind(
    "uncorrelated_mirror_copy",
    Severity.INFO,
    Action.KEPT,
    CORRELATION,
    description="a channel final naming no source repeats the latest reply",
    definition="a kept channel-final mirror (`channel-final`, `channel-final-suppressed`) that"
               " names no source reply and repeats the turn's latest model reply, which "
               "declares no mirror identity, without hanging below it (#126090, #121643: below"
               " the reply it is `delivery_mirror_duplicate`'s); OpenClaw's writer and Gateway"
               " keep such rows",
    alert="A channel-final mirror that names no source reply and repeats the turn's latest "
          "model reply, which declares no mirror identity (#126090, #121643); kept, as "
          "OpenClaw's writer and Gateway keep it. `related_entry_id` is that reply.",
    evidence=(
        hex64(
            "text_hash",
            "64-bit hash (16 hex digits) of the entry's normalized visible text; equal hashes "
            "mean equal text.",
        ),
        text("role", "The mirror's role (`assistant`)."),
        maybe_text("idempotency_key", "The mirror's idempotency key; null when absent."),
    ),
)

CLI_MIRROR_DUPLICATE: Final = AlertKind(
    "cli_mirror_duplicate",
    Severity.WARNING,
    Action.DROPPED,
    REPETITION,
    description="the CLI persister's copy of the reply before it",
    definition="an `api:\"cli\"` assistant whose nearest preceding message (custom entries such "
               "as `openclaw.cache-ttl` skipped) is an assistant with equal text; not when "
               "that is another `api:\"cli\"` reply and this one carries a key of its own (a "
               "retried run, `cli-assistant:<runId>`)",
    alert="An assistant with `api:\"cli\"` repeating the text of the assistant message just "
          "before it (non-message entries skipped). `related_entry_id` is that message.",
    evidence=(
        hex64(
            "text_hash",
            "64-bit hash (16 hex digits) of the entry's normalized visible text; equal hashes "
            "mean equal text.",
        ),
        text("role", "The dropped message's role (`assistant`)."),
    ),
)

CLI_AGGREGATE_DUPLICATE: Final = AlertKind(
    "cli_aggregate_duplicate",
    Severity.WARNING,
    Action.DROPPED,
    REPETITION,
    description="the CLI persister's join of the turn's replies",
    definition="an `api:\"cli\"` text-only assistant whose normalized text is the turn's two or "
               "more model replies (mirrors and `api:\"cli\"` ones aside) joined, all of them, "
               "in order, whatever came between (#118185, #143106: the CLI persister's "
               "`\"\\n\\n\"` join of the parts it streamed)",
    alert="An `api:\"cli\"` assistant whose text is the turn's two or more model replies' texts "
          "joined, in order (#118185, #143106). `related_entry_id` is the turn's latest reply.",
    evidence=(
        hex64(
            "text_hash",
            "64-bit hash (16 hex digits) of the entry's normalized visible text; equal hashes "
            "mean equal text.",
        ),
        text("role", "The dropped message's role."),
    ),
)

CLI_REIMPORT_DUPLICATE: Final = AlertKind(
    "cli_reimport_duplicate",
    Severity.WARNING,
    Action.DROPPED,
    REPETITION,
    description="a CLI reply re-imported after a resume",
    definition="a text-only assistant read back from a CLI's own session file "
               "(`__openclaw.importedFrom`) whose final text equals that of its turn's latest "
               "reply when that is a committed `api:\"cli\"` one (#136251: re-imported after a "
               "resume). An import before the commit makes the commit `cli_mirror_duplicate`'s"
               " copy",
    alert="An assistant read back from a CLI's own session file (`__openclaw.importedFrom`) "
          "repeating the committed `api:\"cli\"` reply of its turn (#136251). `related_entry_id`"
          " is that reply.",
    evidence=(
        hex64(
            "text_hash",
            "64-bit hash (16 hex digits) of the entry's normalized visible text; equal hashes "
            "mean equal text.",
        ),
        text("role", "The dropped message's role."),
        text("imported_from", "Where the copy was imported from (`claude-cli`)."),
    ),
)

CLEANED_CHILD_DUPLICATE: Final = AlertKind(
    "cleaned_child_duplicate",
    Severity.INFO,
    Action.DROPPED,
    REPETITION,
    description="a text-only child repeating its parent reply",
    definition="a text-only assistant (not a mirror) whose `parentId` (as cleaned) is the "
               "previous assistant of the turn, with equal text, when it is a copy: of a raw "
               "reply with thinking (a `[thinking, text]` reply and its cleaned `[text]` "
               "child), with usage absent, zero or identical to the parent's; or of a plain "
               "text-only model reply right after it (no message between), as OpenClaw's "
               "delivery receipt: no `openclawDeliveryMirror` marker, a usage of zeros, "
               "`stopReason: \"stop\"`. A child with usage of its own is a second model turn and"
               " kept (OpenClaw replays both)",
    alert="A text-only assistant child copying its parent, the previous assistant in the turn:"
          " the cleaned copy of a reply that thought (usage absent, zero or the parent's), or "
          "the zero-usage delivery receipt of a plain reply. `related_entry_id` is the parent.",
    evidence=(
        hex64(
            "text_hash",
            "64-bit hash (16 hex digits) of the entry's normalized visible text; equal hashes "
            "mean equal text.",
        ),
        text("role", "The dropped message's role (`assistant`)."),
    ),
)

MISTAGGED_ECHO: Final = AlertKind(
    "mistagged_echo",
    Severity.WARNING,
    Action.DROPPED,
    REPETITION,
    description="an echo of the reply before it under its provider and model",
    definition="an assistant (not a mirror) directly after another of the same provider and "
               "model in the turn, equal text, the earlier with thinking, the later with "
               "neither thinking nor tool calls and usage absent, zero or identical, not "
               "hanging (as cleaned) directly below the user message that opened the turn "
               "(that answers it); evidence names the provider/model it carried",
    alert="An assistant echo of the thinking reply just before it, carrying the same provider "
          "and model and absent, zero or identical usage. `related_entry_id` is the echoed "
          "reply.",
    evidence=(
        hex64(
            "text_hash",
            "64-bit hash (16 hex digits) of the entry's normalized visible text; equal hashes "
            "mean equal text.",
        ),
        text("role", "The dropped message's role (`assistant`)."),
        maybe_text("provider", "The provider the echo carried; null when absent."),
        maybe_text("model", "The model the echo carried; null when absent."),
        Field(
            "usage",
            "The echo's usage: absent, all zero, or identical to the echoed reply's.",
            {"enum": ["absent", "zero", "identical"]},
        ),
    ),
)

REPETITION_CASCADE: Final = AlertKind(
    "repetition_cascade",
    Severity.WARNING,
    Action.KEPT,
    REPLIES,
    description="a reply that repeats one unit of text verbatim",
    definition="an assistant's visible text is k ≥ 2 verbatim copies of one unit of ≥ 20 "
               "characters; evidence: `copies`, `unit_length`",
    alert="An assistant's visible text is k >= 2 verbatim copies of one unit (whitespace "
          "between copies allowed).",
    evidence=(
        count(
            "copies",
            "k, the number of verbatim copies.",
            minimum=2,
        ),
        count(
            "unit_length",
            "Length in characters of the repeated unit.",
            minimum=1,
        ),
    ),
)

DUPLICATE_STORM: Final = AlertKind(
    "duplicate_storm",
    Severity.WARNING,
    Action.KEPT,
    REPLIES,
    description="many of the latest replies were copies",
    definition="3 or more of the last 10 assistant replies were dropped by the correlation and"
               " repetition rules (their lettered ones too); once, re-armed after 10 clean "
               "replies",
    alert="Several of the last assistant replies were dropped by the correlation and "
          "repetition rules; raised once, re-armed after 10 clean replies.",
    evidence=(
        count(
            "dropped",
            "How many of the last `window` assistant replies were dropped.",
            minimum=1,
        ),
        count(
            "window",
            "How many recent assistant replies are counted.",
            minimum=1,
        ),
    ),
    about=SESSION,
)

CONSECUTIVE_ASSISTANT: Final = AlertKind(
    "consecutive_assistant",
    Severity.INFO,
    Action.KEPT,
    REPLIES,
    description="two model replies in a row in one turn",
    definition="two kept model replies in a row in one turn with no toolResult or user "
               "between; mirrors are not replies and do not separate them; a reply after an "
               "error/aborted one is a retry",
    alert="Two kept model replies in a row in one turn with no toolResult or user message "
          "between; warning when the earlier reply has thinking blocks. `related_entry_id` is "
          "the earlier reply.",
    evidence=(
        flag(
            "earlier_has_thinking",
            "Whether the earlier reply has thinking blocks (severity warning when true).",
        ),
    ),
    raised=(Severity.WARNING, "earlier_has_thinking"),
)

THINKING_REJECTION_LOOP: Final = AlertKind(
    "thinking_rejection_loop",
    Severity.CRITICAL,
    Action.KEPT,
    REPLIES,
    description="replies rejected in a row for modified thinking blocks",
    definition="2+ replies in a row (users between allowed) rejected because thinking blocks "
               "\"cannot be modified\" or carry an invalid signature, also via `custom` "
               "`openclaw:prompt-error`; one failure written both ways counts once; once per "
               "loop",
    alert="Consecutive replies rejected because thinking blocks were modified or carry an "
          "invalid signature; raised once per loop.",
    evidence=(
        count(
            "count",
            "How many rejections in a row so far.",
            minimum=2,
        ),
    ),
)

ERROR_LOOP: Final = AlertKind(
    "error_loop",
    Severity.WARNING,
    Action.KEPT,
    REPLIES,
    description="replies failing in a row with the same error",
    definition="3+ replies in a row (users between allowed) that are errors with the same "
               "`errorMessage`; once per loop",
    alert="Consecutive assistant replies failed with the same `errorMessage`; raised once per "
          "loop.",
    evidence=(
        count(
            "count",
            "How many failed replies in a row so far.",
            minimum=3,
        ),
        hex64("error_hash", "64-bit hash (16 hex digits) of the shared error message."),
    ),
)

RETRIED_PROMPT: Final = AlertKind(
    "retried_prompt",
    Severity.INFO,
    Action.KEPT,
    REPLIES,
    description="a prompt sent again after replies that failed empty",
    definition="a user message without the key of the one that opened the turn, with its exact"
               " text, when every reply since was an empty failure (`aborted` or `error`, no "
               "text, no tool calls): an idle-timeout retry (#95766) that nothing tells from a"
               " person sending it again (another timestamp; the same `message` bytes are "
               "`persisted_copy`'s), so kept; evidence: `original_id`; each queued prompt a "
               "fallback candidate appended again (#83404, 2026.5.x: no key, a time of its "
               "own) is such a retry",
    alert="A user message without an idempotency key that repeats the one that opened the turn"
          " after only empty failed replies (an idle timeout's `aborted` turn: #95766); kept, "
          "as a person may send it again. `related_entry_id` is the first message.",
    evidence=(
        maybe_text("original_id", "The id of the user message it repeats."),
    ),
)

DANGLING_PARENT: Final = AlertKind(
    "dangling_parent",
    Severity.WARNING,
    Action.KEPT,
    STRUCTURE,
    description="a parent that is not in the session",
    definition="a `parentId` that names no entry of the session, only when the session was "
               "seen from its start (a header first, then an entry with `parentId: null`) and "
               "nothing was forgotten",
    alert="The entry's `parentId` names no entry of the session (only raised when the session "
          "was seen from its start). `related_entry_id` is the missing parent id.",
    evidence=(
        text("parent_id", "The parent id that names no entry."),
    ),
)

BRANCH_FORK: Final = AlertKind(
    "branch_fork",
    Severity.INFO,
    Action.KEPT,
    STRUCTURE,
    description="a second branch below one parent",
    definition="an entry whose parent already has a kept child; `appendMode:\"side\"` entries, "
               "mirrors and toolResults of the parent's own tool calls excepted, and an entry "
               "re-parented around a dropped copy (the fork is the drop's, not the input's). "
               "Side entries and `leaf` controls are nobody's first child",
    alert="The entry's parent already has a kept child, so it starts a second branch. "
          "`related_entry_id` is the parent.",
    evidence=(
        text("parent_id", "The (kept) parent with two children."),
        text("first_child_id", "The parent's first kept child."),
    ),
)

ORPHANED_TOOL_CALL: Final = AlertKind(
    "orphaned_tool_call",
    Severity.WARNING,
    Action.KEPT,
    STRUCTURE,
    description="a tool call that got no result before its turn ended",
    definition="a turn ends with tool calls that got no result / a toolResult answers a call "
               "never made in the session",
    alert="A tool call that got no toolResult before its turn ended. `entry_id` is the "
          "assistant that made the call.",
    evidence=(
        text("tool_call_id", "The tool call without a result."),
        text("turn_ended_by", "The user message that ended the turn."),
    ),
)

UNKNOWN_TOOL_RESULT: Final = AlertKind(
    "unknown_tool_result",
    Severity.WARNING,
    Action.KEPT,
    STRUCTURE,
    description="a tool result for a call never made",
    definition="a toolResult answering a call never made in the session, only when the session"
               " was seen from its start and nothing was forgotten",
    alert="A toolResult whose `toolCallId` was never called in the session (only raised when "
          "the session was seen from its start).",
    evidence=(
        text("tool_call_id", "The toolCallId no call in the session has."),
    ),
)

SESSION_SEEN_MIDWAY: Final = AlertKind(
    "session_seen_midway",
    Severity.WARNING,
    Action.KEPT,
    STRUCTURE,
    description="a session met mid-way, not from its header",
    definition="the first entry seen of a session with no state is not its header: a worker "
               "meeting the session mid-way (a fresh broker or worker state: the memory-only "
               "broker after a restart), a session forgotten after `--session-ttl` idle, an "
               "excerpt offline. A copy of any entry before it cannot be recognised, so the "
               "session is named, once: an alert about the session (`entry_id` null, "
               "`related_entry_id` the first entry seen); evidence: `first_entry_type`. A "
               "session the TTL forgot is named too: its state is gone as after a fresh broker,"
               " the engine cannot tell the two apart, and a copy of an entry from before the "
               "forgetting (a rewrite appending old rows again, a mirror of an old reply) would"
               " pass just the same. Not raised for a session started from its header, a later"
               " entry of a session with state, or a record processed again (a replay)",
    alert="The first entry the engine sees of a session with no state is not its header (a "
          "fresh broker or worker state, a session forgotten after --session-ttl, an excerpt): "
          "copies of its earlier entries cannot be recognised. About the session: `entry_id` is"
          " null, `related_entry_id` the first entry seen; once per session start.",
    evidence=(
        text("first_entry_type", "The `type` of the first entry seen."),
    ),
    about=SESSION,
)

REPEATED_ANSWER: Final = AlertKind(
    "repeated_answer",
    Severity.WARNING,
    Action.KEPT,
    WAKES,
    description="a completion wake answered with the answer already given",
    definition="a model reply in a turn opened by a completion wake (a user message keyed "
               "`announce:…`, such as a Codex-native child's "
               "`announce:codex-native:<thread>:<child>:<status>:user`) whose final text is "
               "that of the previous turn's final reply (#156070: the parent already took the "
               "child's result through `wait_agent` and answered); kept, a model call billed "
               "on its own; once per wake; evidence: the wake's `idempotency_key`",
    alert="The reply to a completion wake (a turn opened by an `announce:` key) has the final "
          "text of the previous turn's final reply (#156070); kept, a model call of its own. "
          "`related_entry_id` is the earlier reply.",
    evidence=(
        text("idempotency_key", "The wake's idempotency key."),
    ),
)

MALFORMED_ENTRY: Final = AlertKind(
    "malformed_entry",
    Severity.WARNING,
    Action.DEAD_LETTERED,
    INPUT,
    description="a record that is not an entry",
    definition="a line that is not UTF-8 JSON, not an object, lacks a string `type`, or (apart"
               " from the header) lacks a string `id`, a record the engine could not decide "
               "(`engine error: …`), or a streamed record without a usable key or value: "
               "dead-lettered byte for byte with its reason",
    alert="Bad input: the record is not JSON, not an object, lacks a string `type`, lacks a "
          "string `id` (apart from the header), could not be decided by the engine, or "
          "(streaming) has no usable key or value. The record goes to the dead letters; "
          "`entry_id` and `related_entry_id` are null.",
    evidence=(
        text("reason", "Why the record was dead-lettered (also the dead letter's `reason`)."),
        count(
            "bytes",
            "The record's length in bytes.",
            minimum=0,
        ),
    ),
    about=RECORD,
)

KINDS: Final[tuple[AlertKind, ...]] = (
    REDELIVERY,
    REWRITTEN_IN_PLACE,
    ENTRY_ID_CONFLICT,
    IDEMPOTENT_REPLAY,
    ANNOUNCE_RETRY_DUPLICATE,
    CODEX_PROMPT_MIRROR,
    IDEMPOTENCY_KEY_COLLISION,
    POSITIONAL_IDEMPOTENCY_KEY,
    SAME_RESPONSE,
    SAME_TOOL_CALLS,
    SAME_TOOL_RESULT,
    SAME_INBOUND,
    SAME_ANNOUNCE,
    IDENTITY_CONFLICT,
    REWRITE_COPY,
    PERSISTED_COPY,
    SILENT_TURN_REPLAY,
    DELIVERY_MIRROR_DUPLICATE,
    UNCORRELATED_MIRROR_COPY,
    CLI_MIRROR_DUPLICATE,
    CLI_AGGREGATE_DUPLICATE,
    CLI_REIMPORT_DUPLICATE,
    CLEANED_CHILD_DUPLICATE,
    MISTAGGED_ECHO,
    REPETITION_CASCADE,
    DUPLICATE_STORM,
    CONSECUTIVE_ASSISTANT,
    THINKING_REJECTION_LOOP,
    ERROR_LOOP,
    RETRIED_PROMPT,
    DANGLING_PARENT,
    BRANCH_FORK,
    ORPHANED_TOOL_CALL,
    UNKNOWN_TOOL_RESULT,
    SESSION_SEEN_MIDWAY,
    REPEATED_ANSWER,
    MALFORMED_ENTRY,
)
