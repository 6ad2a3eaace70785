"""Parse one raw transcript line once and expose what the rules look at."""

from __future__ import annotations

import json
import re
import zlib
from typing import Final

import orjson
import xxhash

from stream.engine import inbound_text
from stream.engine.stored import ENTRY
from stream.engine.text import (
    SLICE_CHARS,
    XXH3_64,
    crc_join,
    digest64,
    normalized_crc,
    normalized_hash,
    normalized_utf8,
    text_hash,
    visible_text,
)

THINKING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})
# Blocks no channel is sent (OpenClaw's internal reasoning types): not media beside the text.
REASONING_BLOCKS: Final = frozenset({*THINKING_BLOCKS, "reasoning"})
# OpenClaw's tool call block types (`TOOL_CALL_TYPES`: toolCall, toolUse, functionCall), and
# the provider spellings an imported history may keep.
TOOL_CALL_BLOCKS: Final = frozenset(
    {"toolCall", "toolUse", "functionCall", "tool_use", "function_call"}
)
MIRROR_MODELS: Final = frozenset({"delivery-mirror", "gateway-injected"})
# The `openclawDeliveryMirror.kind`s OpenClaw writes and honours; a reply marked with any
# other kind is a model turn to OpenClaw, so it must not become droppable as a mirror here.
MIRROR_KINDS: Final = frozenset(
    {
        "channel-final",
        "channel-final-suppressed",
        "message-tool-source-reply",
        "cron-direct-delivery-context",
        "subagent-completion-direct",
    }
)
ERROR_STOPS: Final = frozenset({"error", "aborted"})
MESSAGE_TOOL: Final = "message"  # OpenClaw's tool that sends to a channel (`openclaw-tools`)
COMMENTARY: Final = "commentary"
PHASES: Final = frozenset({COMMENTARY, "final_answer"})
_POSITIONAL_KEY: Final = re.compile(r"^(?P<scope>.*):(?P<role>user|assistant|toolResult):\d+$")
# OpenClaw's silent replies: the model chose to say nothing (`isSilentReplyText`).
SILENT_REPLIES: Final = frozenset({"NO_REPLY", "HEARTBEAT_OK"})
SILENT_HASHES: Final = frozenset(normalized_hash(token) for token in SILENT_REPLIES)

# An entry's fingerprint packs two digests: the upper 32 bits are of the whole line (what a
# redelivery repeats), the lower of its payload, the part a re-appended copy keeps under a new
# id and parent: the `message` of a message entry, the fields of a compaction. The lowest bit
# says which: set for a payload digest, clear when the entry has none (the line's bits then).
# Both live in the one integer every remembered entry already keeps, which costs a million
# idle sessions nothing.
_LOW: Final = 0xFFFF_FFFF
_HIGH: Final = 0xFFFF_FFFF_0000_0000
# Lines up to this long are sliced to hash their payload (quicker than a view).
_COPIED: Final = 1 << 16
_MESSAGE_KEY: Final = b'"message":'
_ENVELOPE: Final = frozenset({"id", "parentId", "timestamp", "appendMode", "firstKeptEntryId"})
_ORJSON_LOADS: Final = orjson.loads  # a C static, not a module lookup per entry (text.XXH3_64)
_FIND: Final = bytes.find  # likewise, where `raw.find` looks the method up by name each time
_RFIND: Final = bytes.rfind
_LINE_ENDS: Final = (10, 13)  # b"\n", b"\r"
_TIMESTAMP_MEMBER: Final = b'"timestamp":'


class MalformedEntry(ValueError):
    """The line cannot be an entry; the reason goes into the dead letter verbatim."""


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _loads(raw: bytes) -> object:
    try:
        return _ORJSON_LOADS(raw)
    except orjson.JSONDecodeError as fast_error:
        # orjson refuses some valid JSON (lone surrogate escapes, for one); the stdlib parser
        # is the slow path that keeps such lines instead of dead-lettering them.
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedEntry("not UTF-8 text") from None
        try:
            return json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            raise MalformedEntry(f"not JSON: {fast_error}") from None


def record_key(entry_id: str | None) -> str:
    """The memory key of an entry's remembered record ("" for none)."""
    return ENTRY + entry_id if entry_id is not None else ""


def parse(raw: bytes) -> Entry:
    # Only a line that ends with one is stripped: the method call costs more than the check.
    body = raw.rstrip(b"\r\n") if raw and raw[-1] in _LINE_ENDS else raw
    value = _loads(body)
    if not isinstance(value, dict):
        raise MalformedEntry(f"not a JSON object but {type(value).__name__}")
    kind = value.get("type")
    if not isinstance(kind, str):
        raise MalformedEntry("no string 'type' field")
    entry_id = value.get("id")
    if kind != "session" and not (isinstance(entry_id, str) and entry_id):
        raise MalformedEntry("no string 'id' field")
    return Entry(body, value, kind)


class Entry:
    """One parsed entry. What every entry is asked for is read once here; what only some rules
    ask for (texts, their hashes, the content blocks, usage) is computed on first use."""

    __slots__ = (
        "_calls_message_tool",
        "_has_non_text_blocks",
        "_has_other_blocks",
        "_has_thinking",
        "_has_tool_calls",
        "_is_text_only",
        "_message_digest",
        "_normalized_bytes",
        "_phased",
        "_reply_text_hash",
        "_scanned",
        "_text_hash",
        "_tool_call_ids",
        "_usage_hash",
        "_visible_text",
        "_words_digest",
        "api",
        "append_mode",
        "custom_type",
        "error_message",
        "fingerprint",
        "id",
        "idempotency_key",
        "is_error",
        "is_mirror",
        "message",
        "parent_id",
        "parent_key",
        "payload",
        "payload_digest",
        "provider_model",
        "raw",
        "record_key",
        "role",
        "tool_call_id",
        "type",
        "value",
    )

    def __init__(self, raw: bytes, value: dict, kind: str) -> None:
        self.raw = raw
        self.value = value
        self.type = kind
        entry_id = value.get("id")
        self.id: str | None = entry_id if isinstance(entry_id, str) else None
        parent = value.get("parentId")
        self.parent_id: str | None = parent if isinstance(parent, str) and parent else None
        # built once: every entry reads its own record and most its parent's
        self.record_key = record_key(self.id)
        self.parent_key = record_key(self.parent_id)
        custom = value.get("customType") if kind == "custom" else None
        self.custom_type: str | None = custom if isinstance(custom, str) else None
        self.append_mode: object = value.get("appendMode")
        message = value.get("message") if kind == "message" else None
        self.message: dict | None = None
        self.role: str | None = None
        self.provider_model: tuple[str | None, str | None] = (None, None)
        self.is_mirror = False
        self.error_message = ""
        self.is_error = False
        self.idempotency_key: str | None = None
        self.api: str | None = None  # an assistant's: which writer made it ("cli", ...)
        self.tool_call_id: str | None = None
        self._scanned = False
        self._has_thinking = False
        self._has_tool_calls = False
        self._calls_message_tool = False
        self._is_text_only = True
        self._has_other_blocks = False
        self._has_non_text_blocks = False
        self._phased = False
        self._tool_call_ids: list[str] = []
        self._visible_text: str | None = None
        self._text_hash = -1
        self._normalized_bytes: bytes | None = None
        self._reply_text_hash = -1
        self._usage_hash = -1
        self._message_digest = -1
        self._words_digest = -1
        read = message if isinstance(message, dict) else None
        if read is not None:
            self._read_message(read)
        self.payload = 0
        self.payload_digest = 0
        self.fingerprint = self._fingerprint(raw, value, kind, read)

    def _fingerprint(self, raw: bytes, value: dict, kind: str, message: dict | None) -> int:
        """The line's digest with, where the entry has one, its payload's in the lower half
        (`payload`, odd); `payload_digest` keeps the payload's whole 64-bit digest.

        A message's payload is the bytes of its `message` value as written (through the line's
        end: a copy that wrote other keys after it differs, which only keeps it), and only for
        a message stamped with a time, so that two messages alike by chance (neither stamped)
        never look like one copied. The line's digest is then taken over its envelope and the
        payload's digest, so the message is read once. A compaction's payload is its fields but
        the envelope and the kept entry, which a copy names anew."""
        if kind == "message" and message is not None:
            stamp = message.get("timestamp")
            if not isinstance(stamp, bool) and isinstance(stamp, (int, float)) and stamp > 0:
                start = _FIND(raw, _MESSAGE_KEY)
                if start >= 0:
                    split = start + len(_MESSAGE_KEY)
                    # a view of a long line, not a copy: a message can be as long as the record
                    body = raw[split:] if len(raw) <= _COPIED else memoryview(raw)[split:]
                    digest = XXH3_64(body)
                    self.payload_digest = digest
                    self.payload = (digest & _LOW) | 1
                    line = XXH3_64(raw[:split], digest)
                    return (line & _HIGH) | self.payload
        elif kind == "compaction":
            summary = value.get("summary")
            if isinstance(summary, str) and summary:
                fields = {key: item for key, item in value.items() if key not in _ENVELOPE}
                self.payload_digest = digest64(_canonical(fields))
                self.payload = (self.payload_digest & _LOW) | 1
                return (digest64(raw) & _HIGH) | self.payload
        return digest64(raw) & ~1

    def _read_message(self, message: dict) -> None:
        self.message = message
        role = message.get("role")
        self.role = role if isinstance(role, str) else None
        key = message.get("idempotencyKey")
        if not isinstance(key, str):
            legacy = message.get("__openclaw")
            key = legacy.get("idempotencyKey") if isinstance(legacy, dict) else None
        self.idempotency_key = key if isinstance(key, str) and key else None
        if self.role == "assistant":
            # what only a reply is asked for: the other roles keep the defaults
            provider, model = message.get("provider"), message.get("model")
            self.provider_model = (
                provider if isinstance(provider, str) else None,
                model if isinstance(model, str) else None,
            )
            error = message.get("errorMessage")
            self.error_message = error = error if isinstance(error, str) else ""
            stop = message.get("stopReason")
            self.is_error = (isinstance(stop, str) and stop in ERROR_STOPS) or bool(error)
            api = message.get("api")
            self.api = api if isinstance(api, str) else None
            self.is_mirror = _is_mirror(message, self.provider_model)
        elif self.role == "toolResult":
            call_id = message.get("toolCallId")
            self.tool_call_id = call_id if isinstance(call_id, str) and call_id else None

    def field(self, name: str) -> object:
        return self.message.get(name) if self.message is not None else None

    def _scan_blocks(self) -> None:
        """What kinds of content blocks the entry has, all its flags in one pass."""
        self._scanned = True
        content = self.field("content")
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                signature = block.get("textSignature")
                if isinstance(signature, str) and signature.startswith("{"):
                    self._phased = True
                continue
            self._is_text_only = False
            if not isinstance(kind, str):
                continue  # no block any reader shows
            self._has_non_text_blocks = True
            if kind in THINKING_BLOCKS:
                self._has_thinking = True
            elif kind in TOOL_CALL_BLOCKS:
                self._has_tool_calls = True
                call_id = block.get("id")
                if isinstance(call_id, str):
                    self._tool_call_ids.append(call_id)
                if block.get("name") == MESSAGE_TOOL:
                    self._calls_message_tool = True
            elif kind not in REASONING_BLOCKS:
                self._has_other_blocks = True  # an image, an attachment, a kind unknown here

    @property
    def has_thinking(self) -> bool:
        if not self._scanned:
            self._scan_blocks()
        return self._has_thinking

    @property
    def has_tool_calls(self) -> bool:
        if not self._scanned:
            self._scan_blocks()
        return self._has_tool_calls

    @property
    def calls_message_tool(self) -> bool:
        """A call of OpenClaw's `message` tool: the model sends a message to a channel."""
        if not self._scanned:
            self._scan_blocks()
        return self._calls_message_tool

    @property
    def tool_call_ids(self) -> list[str]:
        if not self._scanned:
            self._scan_blocks()
        return self._tool_call_ids

    @property
    def has_other_blocks(self) -> bool:
        """Blocks that are neither text, reasoning nor tool calls: images, attachments, ..."""
        if not self._scanned:
            self._scan_blocks()
        return self._has_other_blocks

    @property
    def has_non_text_blocks(self) -> bool:
        """Blocks of a kind other than text (blocks without a string type are no blocks)."""
        if not self._scanned:
            self._scan_blocks()
        return self._has_non_text_blocks

    @property
    def is_text_only(self) -> bool:
        if not self._scanned:
            self._scan_blocks()
        return self._is_text_only

    @property
    def visible_text(self) -> str:
        text = self._visible_text
        if text is None:
            text = self._visible_text = visible_text(self.field("content"))
        return text

    @property
    def text_hash(self) -> int:
        """0 stands for 'no text': rules never fire on empty text."""
        value = self._text_hash
        if value < 0:
            value = self._hash_text()
        return value

    def _hash_text(self) -> int:
        text = self.visible_text
        if len(text) > SLICE_CHARS:
            self._text_hash = normalized_hash(text)
            return self._text_hash
        data = normalized_utf8(text)
        self._normalized_bytes = data  # kept: a reply's text may be joined into a CRC next
        self._text_hash = digest64(data) | 1 if data else 0
        return self._text_hash

    def extend_crc(self, crc: int, size: int) -> tuple[int, int]:
        """(CRC-32, byte length) of a join of normalized texts (`crc`, `size` so far; `size`
        0 for none) with this entry's normalized text after one space; (0, -1) when this
        text is too long to keep for it."""
        if self._text_hash < 0:
            self._hash_text()
        data = self._normalized_bytes
        return crc_join(crc, size, data) if data is not None else (0, -1)

    def normalized_crc(self) -> tuple[int, int]:
        """(CRC-32, byte length) of the normalized text alone."""
        if self._text_hash < 0:
            self._hash_text()
        data = self._normalized_bytes
        if data is None:
            return normalized_crc(self.visible_text)
        return zlib.crc32(data), len(data)

    @property
    def exact_text_hash(self) -> int:
        """A hash of the visible text as written, 0 for none: cheaper than the normalized one,
        for a text that comes back unchanged (a prompt sent again)."""
        text = self.visible_text
        return text_hash(text) | 1 if text else 0

    @property
    def is_silent(self) -> bool:
        """A reply that says nothing on purpose: its final text is a silent token."""
        return self.reply_text_hash in SILENT_HASHES

    @property
    def is_side(self) -> bool:
        """Written beside the active branch (`appendMode: "side"`), not on it."""
        return self.append_mode == "side"

    @property
    def imported_from(self) -> str | None:
        """`__openclaw.importedFrom`: the entry was read from another store (a CLI's own session
        file), not written by a model call of this session."""
        facts = self.field("__openclaw")
        source = facts.get("importedFrom") if isinstance(facts, dict) else None
        return source if isinstance(source, str) and source else None

    @property
    def from_person(self) -> bool:
        """A user message a person sent: without OpenClaw's `provenance`, or with its
        `external_user` kind (ACP, voice); OpenClaw's own inputs (`internal_system`:
        heartbeats, wakes; `inter_session`: announces, another session's sends) are not."""
        provenance = self.field("provenance")
        if not isinstance(provenance, dict):
            return True
        return provenance.get("kind") == "external_user"

    @property
    def provenance_tool(self) -> str | None:
        """`provenance.sourceTool` of an input OpenClaw wrote itself (a heartbeat, a subagent's
        announce) rather than a person."""
        provenance = self.field("provenance")
        tool = provenance.get("sourceTool") if isinstance(provenance, dict) else None
        return tool if isinstance(tool, str) else None

    @property
    def reply_text_hash(self) -> int:
        """What a mirror of this reply repeats: the hash of its text without commentary (the
        final answer is what is delivered), or 0 when the reply also carries media, an
        attachment or a display block of another kind, which a text copy does not repeat."""
        value = self._reply_text_hash
        if value < 0:
            value = self._reply_text_hash = self._final_text_hash()
        return value

    def _final_text_hash(self) -> int:
        if self.has_other_blocks or self.has_attachments:
            return 0
        phase = self.field("phase")
        if not self._phased and phase != COMMENTARY:
            return self.text_hash
        return normalized_hash(final_text(self.field("content"), phase, self._phased))

    @property
    def has_attachments(self) -> bool:
        """Media or attachments beside the content: display blocks other than text and
        reasoning (the Gateway's canonical display content), media facts, media the delivery
        sent."""
        message = self.message
        if message is None:
            return False
        display = message.get("openclawDisplayContent")
        if isinstance(display, list) and any(_shows_media(block) for block in display):
            return True
        facts = message.get("__openclaw")
        if isinstance(facts, dict) and _non_empty(facts.get("media")):
            return True
        delivery = message.get("openclawDelivery")
        return isinstance(delivery, dict) and (
            _non_empty(delivery.get("mediaUrls")) or _non_empty(delivery.get("mediaUrl"))
        )

    @property
    def response_id(self) -> str | None:
        """The provider's id of the model call that wrote the reply (`responseId`)."""
        value = self.field("responseId")
        return value if isinstance(value, str) and value else None

    @property
    def inbound_identity(self) -> str | None:
        """The channel's own id of an inbound user message with the route it came by, as
        OpenClaw 2026.8+ records them (`__openclaw.transport`: channel, conversation and
        message id; `buildChannelSourceTurnId` scopes a provider's ids the same way, as they
        are not unique across conversations)."""
        facts = self.field("__openclaw")
        transport = facts.get("transport") if isinstance(facts, dict) else None
        if not isinstance(transport, dict):
            return None
        message_id = transport.get("messageId")
        if isinstance(message_id, int) and not isinstance(message_id, bool):
            message_id = str(message_id)
        if not (isinstance(message_id, str) and message_id):
            return None
        route = [transport.get("channel"), transport.get("conversationRef")]
        if not all(isinstance(part, str) and part for part in route):
            return None
        return f"{route[0]}\x00{route[1]}\x00{message_id}"

    @property
    def delivery_marker(self) -> dict:
        """A mirror's `openclawDeliveryMirror`: what it says it delivered ({} for none)."""
        marker = self.field("openclawDeliveryMirror")
        return marker if isinstance(marker, dict) else {}

    @property
    def mirror_identity(self) -> str | None:
        """`__openclaw.mirrorIdentity` of a reply: the reply declares that it is mirrored."""
        facts = self.field("__openclaw")
        identity = facts.get("mirrorIdentity") if isinstance(facts, dict) else None
        return identity if isinstance(identity, str) and identity else None

    @property
    def usage_kind(self) -> str:
        """'absent', 'zero' or 'counted': an echo copies usage or carries none."""
        usage = self.field("usage")
        if usage is None or usage == {}:
            return "absent"
        return "zero" if _all_zero(usage) else "counted"

    @property
    def usage_hash(self) -> int:
        value = self._usage_hash
        if value < 0:
            usage = self.field("usage")
            value = self._usage_hash = digest64(_canonical(usage)) if usage else 0
        return value

    @property
    def content_fingerprint(self) -> int:
        return digest64(_canonical([self.role, self.field("content")]))

    @property
    def words_digest(self) -> int:
        """A user message's words without OpenClaw's context blocks (`inbound_text`)."""
        value = self._words_digest
        if value < 0:
            value = self._words_digest = inbound_text.words_digest(self.visible_text)
        return value

    @property
    def message_digest(self) -> int:
        """The message without its own timestamp, for one OpenClaw wrote without a numeric one
        (0 for an entry without a message): a stamped message is compared by its payload and
        stamp instead (`same_message`)."""
        value = self._message_digest
        if value < 0:
            value = self._message_digest = self._digest_message()
        return value

    def _digest_message(self) -> int:
        message, raw = self.message, self.raw
        start = _FIND(raw, _MESSAGE_KEY) if message is not None else -1
        if message is None or start < 0:
            return 0
        if "timestamp" not in message:
            return XXH3_64(memoryview(raw)[start + len(_MESSAGE_KEY):]) | 1
        # written otherwise than OpenClaw writes it: canonical JSON, timestamp aside
        rest = {key: item for key, item in message.items() if key != "timestamp"}
        return digest64(_canonical(rest)) | 1

    @property
    def message_token(self) -> tuple[int, object]:
        """What an identity remembers of the message, to tell a copy by later: its payload's
        digest and its stamp (both already read), or, unstamped, its message digest."""
        if self.payload_digest:
            return self.payload_digest, self.field("timestamp")
        return self.message_digest, None

    def same_message(self, digest: int, stamp: object) -> bool:
        """Whether this message is the one `message_token` gave (`digest`, `stamp`) but for its
        own timestamp, as OpenClaw's idempotent replay compares messages (deep equality
        without the top-level timestamp): a copy stamped anew is still the same message."""
        if stamp is None:
            return not self.payload_digest and self.message_digest == digest
        if not self.payload_digest:
            return False
        if self.payload_digest == digest:
            return True
        return self._restamped(stamp) == digest

    def _restamped(self, stamp: object) -> int:
        """The payload's digest this message would have with `stamp` for its own timestamp."""
        raw, message = self.raw, self.message
        start = _FIND(raw, _MESSAGE_KEY)
        if message is None or start < 0:
            return 0
        member = _TIMESTAMP_MEMBER + _json_scalar(message.get("timestamp"))
        # OpenClaw writes a message's timestamp as its last member: found at once from the end
        at = _RFIND(raw, member, start)
        if at < 0:
            return 0
        stamped = xxhash.xxh3_64(memoryview(raw)[start + len(_MESSAGE_KEY):at])
        stamped.update(_TIMESTAMP_MEMBER + _json_scalar(stamp))
        stamped.update(memoryview(raw)[at + len(member):])
        return stamped.intdigest()


def _json_scalar(value: object) -> bytes:
    """A scalar as compact JSON writes it (an int by its digits, without orjson's buffer)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode()
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value).encode()


def payload_of(fingerprint: int) -> int:
    """The payload digest a fingerprint carries, 0 for none."""
    return fingerprint & _LOW if fingerprint & 1 else 0


def _shows_media(block: object) -> bool:
    """A display block other than text and reasoning: a tool call, an attachment, an image."""
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    return not (isinstance(kind, str) and (kind == "text" or kind in REASONING_BLOCKS))


def _non_empty(value: object) -> bool:
    return isinstance(value, (list, str)) and len(value) > 0


def text_phase(block: dict) -> str | None:
    """The phase a text block's signature names (OpenClaw: a JSON signature of version 1 with
    `phase` commentary or final_answer), else None."""
    signature = block.get("textSignature")
    if not (isinstance(signature, str) and signature.startswith("{")):
        return None
    try:
        parsed = orjson.loads(signature)
    except orjson.JSONDecodeError:
        return None
    version = parsed.get("v") if isinstance(parsed, dict) else None
    if version is True or version != 1:  # OpenClaw's `v === 1`, which `true` is not
        return None
    phase = parsed.get("phase") if isinstance(parsed, dict) else None
    return phase if isinstance(phase, str) and phase in PHASES else None


def final_text(content: object, message_phase: object, phased: bool) -> str:
    """The visible text without commentary: without the text blocks whose signature names
    phase commentary, or empty when the message's own phase is commentary and no block names
    a phase (`phased`: some block's signature may)."""
    if not isinstance(content, list):
        return "" if message_phase == COMMENTARY else visible_text(content)
    named = [text_phase(block) if isinstance(block, dict) else None for block in content]
    if not (phased and any(phase is not None for phase in named)):
        return "" if message_phase == COMMENTARY else visible_text(content)
    kept = [block for block, phase in zip(content, named, strict=True) if phase != COMMENTARY]
    return visible_text(kept)


def _is_mirror(message: dict, provider_model: tuple[str | None, str | None]) -> bool:
    """A transcript-only mirror: what the gateway delivered, not a model reply."""
    provider, model = provider_model
    if provider == "openclaw" and model in MIRROR_MODELS:
        return True
    mirror = message.get("openclawDeliveryMirror")
    kind = mirror.get("kind") if isinstance(mirror, dict) else None
    return isinstance(kind, str) and kind in MIRROR_KINDS


def positional_scope(key: str) -> tuple[str, str] | None:
    """(scope, role) of a `scope:role:N` key, whose index shifts when a snapshot changes."""
    match = _POSITIONAL_KEY.match(key)
    return (match["scope"], match["role"]) if match else None


def _canonical(value: object) -> bytes:
    """Bytes to hash a JSON value by; the stdlib takes what orjson cannot write (huge integers
    kept by the slow parse path, lone surrogates), so such entries are kept, not dead-lettered."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")


def _all_zero(value: object) -> bool:
    if isinstance(value, dict):
        return all(_all_zero(item) for item in value.values())
    if isinstance(value, list):
        return all(_all_zero(item) for item in value)
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value == 0
    return value is None
