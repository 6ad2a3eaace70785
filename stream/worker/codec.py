"""How the worker's tables hold values: a format byte, then MessagePack.

Table values are short lists of 64-bit hashes, small ints, ids and nulls, held by the
million in memory and written to the changelogs: MessagePack keeps a hash in 9 bytes where
JSON spends up to 20 digits, which halves both (a session's state 290 -> 160 bytes, a
remembered id 69 -> 32). Strings pass lone surrogates through, as the engine's ids may hold
them.

Every value names its format (`STATE_FORMAT`, see CHANGELOG.md) in its first byte, the
format's number. Values written before formats were named (session-stream 0.1.0) carry no
byte and are format 1: every one of them is an array (a session is [touched, partition,
state], a remembered value a list), in MessagePack, whose first byte is 0x90-0x9f, 0xdc or
0xdd, or, before 0a6424d, in JSON, whose first byte is "[" (0x5b). A format byte is 2-0x5a:
MessagePack's positive fixints, which no array begins with, and below "[". So the first byte
alone tells them apart. Format 2 holds format 1's lists; format 3 holds format 2's, and a
stored session may carry a fourth item, the session's memory while it is small
(`stream.worker.tables`); format 4 holds format 3's, with the identity index's memory keys and
the state fields it added (`stream.engine.state.STATE_FORMAT`).
"""

from __future__ import annotations

from typing import Final

import msgpack
import orjson

from stream.engine.stored import STATE_FORMAT
from stream.formats import FormatTooNew

# The formats this version writes: the current one, and the one each earlier release reads
# while its workers may still read the tables (`--upgrade-from`, docs/upgrading.md).
WRITABLE: Final = (1, 2, 3, 4)
_TAG: Final = bytes([STATE_FORMAT])
_JSON_ARRAY: Final = 0x5B
_LAST_TAG: Final = _JSON_ARRAY - 1

_packer = msgpack.Packer(unicode_errors="surrogatepass")


def pack(value: list, state_format: int = STATE_FORMAT) -> bytes:
    if state_format == STATE_FORMAT:
        return _TAG + _packer.pack(value)
    if state_format == 1:  # 0.1.0's values begin with the MessagePack array itself
        return _packer.pack(value)
    return bytes([state_format]) + _packer.pack(value)


def pack_memory(memory: dict[str, list]) -> bytes:
    """A session's memory as its stored value holds it (format 3): a map packed on its own,
    which reading the value leaves as bytes until the memory is asked for."""
    return _packer.pack(memory)


def unpack_memory(data: bytes) -> dict[str, list]:
    return msgpack.unpackb(data, unicode_errors="surrogatepass")


def format_of(data: bytes) -> int:
    """The format a value is in; ValueError for bytes no version wrote."""
    if not data:
        raise ValueError("an empty table value")
    first = data[0]
    if 0x90 <= first <= 0x9F or first in (0xDC, 0xDD, _JSON_ARRAY):
        return 1
    if 2 <= first <= _LAST_TAG:
        return first
    raise ValueError(f"a table value starting with byte 0x{first:02x} is in no format")


def check(data: bytes, where: str) -> None:
    """Refuse a value newer than this version reads (FormatTooNew). Bytes in no format pass:
    reading them is where an unreadable session is started afresh, as it always was."""
    try:
        found = format_of(data)
    except ValueError:
        return
    if found > STATE_FORMAT:
        raise FormatTooNew("state", where, found, STATE_FORMAT)


def unpack(data: bytes) -> list:
    found = format_of(data)
    if 2 <= found <= STATE_FORMAT:  # MessagePack after the format's byte
        return msgpack.unpackb(memoryview(data)[1:], unicode_errors="surrogatepass")
    if found == 1:
        # Format 2 holds format 1's lists unchanged: read as they are (upgraded in place).
        if data[0] == _JSON_ARRAY:
            return orjson.loads(data)
        return msgpack.unpackb(data, unicode_errors="surrogatepass")
    raise FormatTooNew("state", "a table value", found, STATE_FORMAT)
