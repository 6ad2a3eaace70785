"""Per-session state: a small fixed-size record of the current turn plus a bounded memory.

`SessionState` holds only what the next entry is compared with (hashes and ids, never
texts), so it stays a few hundred bytes however long the session grows. Everything that
grows with the session (seen entry ids, idempotency keys, tool call ids) lives in a
`Memory`, a key-value view the adapter backs with a dict or a Faust table.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Final

from mypy_extensions import mypyc_attr

# The engine's module constants are Final: compiled, they become C constants instead of
# lookups in the module's dict.

# Message roles as small ints keep the serialized state short.
NONE: Final = 0
USER: Final = 1
ASSISTANT: Final = 2
TOOL_RESULT: Final = 3
OTHER: Final = 4
ROLE_CODES: Final = {"user": USER, "assistant": ASSISTANT, "toolResult": TOOL_RESULT}

# How the session started, for rules that must never guess about entries before it.
START_UNKNOWN: Final = 0
START_HEADER: Final = 1
START_SEEN: Final = 2
START_PARTIAL: Final = 3

# The last failure event of the thinking-rejection loop; one failure is often written twice
# (an `openclaw:prompt-error` custom entry and an assistant error) and must count once.
FAIL_NONE: Final = 0
FAIL_ASSISTANT: Final = 1
FAIL_PROMPT: Final = 2
FAIL_MERGED: Final = 3


# The fields are stored by position (`to_list`, FIELD_NAMES): an older release reads them during
# a rolling upgrade, so their order is a stored format (stream/engine/stored.py) and new ones go
# last. Which module reads and writes a field is not its place: each field says its owner, the
# engine's turn (`_advance_turn`) or the one rule module that keeps it (its `open_turn` and
# `note_reply`, or the rule itself).
@dataclass(slots=True)
class SessionState:
    seq: int = 0
    origin: int = 0
    position: int = -1
    start: int = START_UNKNOWN
    positional_alerted: bool = False  # rules/keys
    # the engine's turn, which every rule reads; latest_text_*: the latest kept assistant with
    # visible text, a model reply (then the hash is its `reply_text_hash`) or a mirror
    latest_text_hash: int = 0
    latest_text_id: str | None = None
    last_role: int = NONE
    last_text_hash: int = 0
    last_id: str | None = None
    # rules/repetition: the turn's previous assistant
    prev_id: str | None = None
    prev_text_hash: int = 0
    prev_model_hash: int = 0  # 0 unless prev_thinking: nothing reads it then
    prev_thinking: bool = False
    prev_usage_hash: int = 0  # 0 unless prev_thinking, as prev_model_hash
    # rules/replies (`consecutive_assistant`): the turn's latest model reply
    reply_id: str | None = None
    reply_thinking: bool = False
    reply_error: bool = False
    pending_calls: list[list] = field(default_factory=list)  # rules/structure
    # rules/replies: loops and storms across turns
    storm_window: int = 0
    storm_armed: bool = True
    storm_clean: int = 0
    think_count: int = 0
    think_last: int = FAIL_NONE
    think_alerted: bool = False
    error_hash: int = 0
    error_count: int = 0
    error_alerted: bool = False
    # Fields added later go last: a state stored by an earlier version loads with their defaults.
    prev_plain: bool = False  # rules/repetition
    latest_is_mirror: bool = False
    latest_mirrored: bool = False  # the latest is a reply that declares a mirror identity
    turn_seq: int = 0  # the seq of the message that opened the turn
    # rules/repetition: CRC-32 and byte length of the turn's model replies with text,
    # normalized and joined by a space, and how many they are, for a record that repeats them
    # joined (`cli_aggregate_duplicate`); length -1 once a reply was too long to follow
    parts_crc: int = 0
    parts_length: int = 0
    parts_count: int = 0
    last_cli: bool = False  # rules/repetition: the last message is an `api: "cli"` assistant
    latest_cli: bool = False  # rules/repetition: the latest reply with text is one
    # The fields below keep their defaults most of the time, and a stored state leaves out its
    # trailing defaults: a session pays for them only while they hold something.
    # rules/replies (`retried_prompt`): the user message that opened the turn, until a reply
    # that is not an empty failure
    retry_hash: int = 0
    retry_id: str | None = None
    retry_failed: bool = False  # an empty aborted or failed reply came since
    # rules/heartbeat, read by `silent_turn_replay`: in a heartbeat turn, the previous turn's
    # final reply, and whether a silent one came since
    heartbeat_hash: int = 0
    heartbeat_id: str | None = None
    heartbeat_silent: bool = False
    # rules/wakes: in a turn opened by a completion wake (an `announce:` key), the previous
    # turn's final reply, and the wake's key, until a reply repeats it (`repeated_answer`)
    announce_hash: int = 0
    announce_id: str | None = None
    announce_key: str | None = None
    # rules/correlation (format 4): a model reply of the turn sent a message through OpenClaw's
    # `message` tool, so a mirror in the turn may record that send rather than copy a reply
    turn_sent: bool = False
    # the seq of the latest user message a person sent (not OpenClaw's own input: a heartbeat,
    # a wake, an announce, another session's send)
    person_seq: int = 0
    # a model reply with text answered that message
    person_answered: bool = False

    def is_replay(self, origin: int, position: int) -> bool:
        """A record at or before the last one processed from the same origin was seen already
        (`origin` is its source's `origin_digest()`)."""
        return self.origin == origin and position <= self.position

    def advance(self, origin: int, position: int) -> None:
        self.origin = origin
        self.position = position

    def start_turn(self) -> None:
        """The turn's own fields anew; each rule's `open_turn` resets the fields it owns."""
        self.turn_seq = self.seq
        self.latest_text_hash = 0
        self.latest_text_id = None
        self.latest_is_mirror = False
        self.latest_mirrored = False

    def to_list(self) -> list:
        """The fields in order, without the trailing ones that hold their defaults: they load
        back as defaults, as the fields a state stored by an earlier version lacks do."""
        values = [getattr(self, name) for name in FIELD_NAMES]
        end = len(values)
        while end and values[end - 1] == _DEFAULTS[end - 1]:
            end -= 1
        return values[:end]

    @classmethod
    def from_list(cls, values: list) -> SessionState:
        return cls(*values)


# The order a stored state lists the fields in (`to_list`).
FIELD_NAMES: Final = tuple(f.name for f in fields(SessionState))
_DEFAULTS = [getattr(SessionState(), name) for name in FIELD_NAMES]


def source_hash(origin: int, position: int) -> int:
    """Which record of which origin wrote a memory value. Distinct positions of one origin
    never collide: multiplying by an odd constant is a bijection modulo 2**64."""
    return (origin ^ (position * 0x9E3779B97F4A7C15)) & 0xFFFF_FFFF_FFFF_FFFF


# An adapter in plain Python (a Quix Streams app keeping it in its state store, a test's fake)
# subclasses it too, though the engine is compiled.
@mypyc_attr(allow_interpreted_subclasses=True)
class Memory:
    """What a session remembers beyond its current turn, keyed by short namespaced strings.

    Values are small JSON-serializable lists whose first item is the `seq` at which they
    were written; the engine ignores values older than its window, so an implementation may
    drop them whenever it likes and still give the same results.

    A base class rather than a Protocol: compiled, the engine's reads and writes (a few per
    entry) are then direct calls of the subclass's methods, not Python method calls.
    """

    __slots__ = ()

    def get(self, key: str) -> list | None:
        raise NotImplementedError

    def put(self, key: str, value: list) -> None:
        raise NotImplementedError


class DictMemory(Memory):
    """The in-process memory: a dict pruned of out-of-window values as it grows."""

    def __init__(self, window: int) -> None:
        self._window = window
        self._values: dict[str, list] = {}
        self._prune_at = 4 * window + 64
        self._latest_seq = 0

    def get(self, key: str) -> list | None:
        return self._values.get(key)

    def put(self, key: str, value: list) -> None:
        self._values[key] = value
        self._latest_seq = max(self._latest_seq, value[0])
        if len(self._values) > self._prune_at:
            oldest = self._latest_seq - self._window
            self._values = {k: v for k, v in self._values.items() if v[0] > oldest}
            self._prune_at = max(4 * self._window + 64, 2 * len(self._values))

    def __len__(self) -> int:
        return len(self._values)


@dataclass(slots=True)
class Session:
    """Everything the engine needs about one session while it processes an entry."""

    id: str
    state: SessionState
    memory: Memory
