"""What the engine stores, in one place: the state format, the prefixes of its memory keys, the
layout of the entry record and the state fields each format holds.

They are a stored format: workers of an earlier release read them during a rolling upgrade
(docs/upgrading.md), so each says which state format introduced it, and a worker writing an
earlier format (`--upgrade-from`, `Limits.state_format`) writes nothing a later one added
(tests/worker/test_state_formats.py holds it to `INTRODUCED`). Format 3 changed where a
session's memory is kept (stream/worker/tables.py), not what it holds.

Every memory value is a list whose first item is the `seq` it was written at (`Context.remember`);
the layouts below list what follows it.
"""

from __future__ import annotations

from typing import Final

from stream.engine.state import FIELD_NAMES

# The format of the state and memory this version stores (CHANGELOG.md, docs/upgrading.md).
STATE_FORMAT: Final = 4
# The identity index and what else format 4 added: its memory keys below, the message digest
# and stamp in a tool call's record, and the turn fields `turn_sent`, `person_seq` and
# `person_answered`.
IDENTITY_INDEX_FORMAT: Final = 4

# -- format 1 ---------------------------------------------------------------------------------
# "e:<entry id>" -> the entry record, below.
ENTRY: Final = "e:"
# "k:<key>" -> [content fingerprint, entry id]: the first user (or other non-assistant,
# non-toolResult) message with the idempotency key.
KEY: Final = "k:"
# "i:<scope>\0<role>\0<content fingerprint hex>" -> [entry id]: a positional key's identity.
POSITIONAL_KEY: Final = "i:"
# "v:<entry id>\0<fingerprint hex>" -> [source hash]: each conflicting version of an id kept.
VERSION: Final = "v:"
# "t:<tool call id>" -> [issuing reply id]; from format 4 on [issuing reply id, message digest,
# stamp] (`Entry.message_token`), the identity of a call the provider names once.
TOOL_CALL: Final = "t:"

# -- format 2 ---------------------------------------------------------------------------------
# "ka:<key>", "kt:<key>" -> as "k:", for an assistant's and a toolResult's key: OpenClaw looks a
# key up per role.
ASSISTANT_KEY: Final = "ka:"
TOOL_RESULT_KEY: Final = "kt:"
# "o:" -> [content fingerprint, entry id, whether its key is a Codex prompt key]: the keyed user
# message that opened the latest turn.
OPENER: Final = "o:"
# "r:" -> [entry id]: the session's first kept entry without a parent.
ROOT: Final = "r:"
# "p:<payload digest hex>" -> [entry id, `firstKeptEntryId` or ""]: a kept user message's or
# compaction's payload; from format 4 on, a user message with a numeric `timestamp` is kept as
# "p:<words digest xor timestamp, decimal>" (its millisecond and words, `persisted_copy`).
PAYLOAD: Final = "p:"

# -- format 4: the identity index --------------------------------------------------------------
# "R:<responseId>", "T:<issuing reply id>\0<toolCallId>", "M:<route>\0<message id>" ->
# [message digest, stamp, entry id]; "N:<route and id as the text gives them>" -> [words hash,
# None, entry id]; "A:<child session>\0<report hash hex>" -> [report hash, None, entry id].
RESPONSE: Final = "R:"
TOOL_RESULT: Final = "T:"
INBOUND: Final = "M:"
INBOUND_TEXT: Final = "N:"
ANNOUNCE: Final = "A:"
# "V:<identity key>\0<digest hex>" -> [entry id]: each other message kept under an identity.
IDENTITY_VERSION: Final = "V:"
# "X:<reply text hash hex>" -> [entry id]: the latest kept model reply with that final text.
REPLY_TEXT: Final = "X:"

# The state format that introduced each prefix.
INTRODUCED: Final = {
    ENTRY: 1, KEY: 1, POSITIONAL_KEY: 1, VERSION: 1, TOOL_CALL: 1,
    ASSISTANT_KEY: 2, TOOL_RESULT_KEY: 2, OPENER: 2, ROOT: 2, PAYLOAD: 2,
    RESPONSE: 4, TOOL_RESULT: 4, INBOUND: 4, INBOUND_TEXT: 4, ANNOUNCE: 4, IDENTITY_VERSION: 4,
    REPLY_TEXT: 4,
}

# The entry record ("e:"), since format 1: [seq, fingerprint, source hash, drop rule, related
# id, kept ancestor, first kept child], and for a kept final model reply (no tool calls) with
# text a mirror would repeat, its `reply_text_hash` last. A dropped entry's related id is the
# entry it repeats, and its kept ancestor where what hangs below it goes; a kept entry's related
# id is the entry it stands beside (the first child of the entry it hangs below, or of what that
# one stands for), whose copy its own children may be.
E_FP: Final = 1
E_SRC: Final = 2
E_RULE: Final = 3
E_RELATED: Final = 4
E_ANCESTOR: Final = 5
E_CHILD: Final = 6
E_REPLY_TEXT: Final = 7

# How many of the state's fields (`SessionState.to_list`, in `FIELD_NAMES` order) each format
# holds: the release that wrote it loads a state by position into the fields it knew, and starts
# a session whose state holds more afresh. 0.1.0 knew them through `heartbeat_silent`; 0.2.0
# added the state of a turn a completion wake opened, through `announce_key`; format 4 the turn
# fields of the identity index's release, after it.
STATE_FIELDS: Final = {
    1: FIELD_NAMES.index("heartbeat_silent") + 1,
    2: FIELD_NAMES.index("announce_key") + 1,
    3: FIELD_NAMES.index("announce_key") + 1,
    4: len(FIELD_NAMES),
}
