"""Text helpers shared by the rules: visible text, normalization, hashing, repetition.

A reply can be as long as a record (16 MiB). Splitting such a text into a list of its words, or
listing the index of each of its characters, costs tens of times its size, so the helpers that
see whole replies walk them in slices of `SLICE_CHARS` instead: one entry costs a small multiple
of its own size, whatever it holds.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from typing import Final

import xxhash

# Reply directives are routing hints for the gateway, not words the user sees; a mirror
# that drops them is still the same message.
_LEADING_DIRECTIVES: Final = re.compile(
    r"^\s*(?:\[\[\s*(?:reply_to_current|reply_to\s*:[^\]]*|audio_as_voice)\s*\]\]\s*)+"
)
_DIRECTIVE_STARTS: Final = ("[", " ", "\t", "\n", "\r")

# The characters `str.split()` splits at (those `str.isspace()` accepts; none lies above
# U+3000, a test checks), so that slicing agrees with it exactly.
SPACES: Final = "".join(chr(code) for code in range(0x3001) if chr(code).isspace())
_DELETE_SPACES: Final[dict[int, None]] = {ord(char): None for char in SPACES}
_SPACE: Final = re.compile("[" + re.escape(SPACES) + "]")
_NON_SPACE: Final = re.compile("[^" + re.escape(SPACES) + "]")
# UTF-8 writes the ASCII ones as single bytes that no other character's bytes contain; the
# others are not printable (`str.isprintable`), nor is any but the space (a test checks).
_ASCII_SPACES: Final = bytes(ord(char) for char in SPACES if char.isascii())
_TO_SPACE: Final = bytes.maketrans(_ASCII_SPACES, b" " * len(_ASCII_SPACES))

# Long texts are read this many characters at a time; shorter ones in one go.
SLICE_CHARS: Final = 1 << 16

# Bound once: compiled, a Final is a C static, where `xxhash.xxh3_64_intdigest` is a lookup in
# the module's dict on every call (several per entry).
XXH3_64: Final = xxhash.xxh3_64_intdigest


def digest64(data: bytes) -> int:
    """A 64-bit content hash: state keeps hashes, never texts. XXH3 hashes a whole entry in a
    fifteenth of the time blake2b took, which was as long as parsing it."""
    return XXH3_64(data)


def text_hash(text: str) -> int:
    return digest64(text.encode("utf-8", "surrogatepass"))


def visible_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                stripped = text.strip()
                if stripped:
                    parts.append(stripped)
    return "\n".join(parts)


def normalize(text: str) -> str:
    if text.startswith(_DIRECTIVE_STARTS):
        text = _LEADING_DIRECTIVES.sub("", text, count=1)
    return " ".join(text.split())


def normalized_utf8(text: str) -> bytes:
    """`normalize(text)` in UTF-8 (lone surrogates passed through), what its hash is of.

    A text whose only whitespace is ASCII (any ASCII text; another once its newlines are spaces,
    when it is all printable) is normalized in its bytes, where only the places two spaces
    meet are left to change, instead of being split into words: a reply's hundred words were a
    hundred strings to make."""
    if text.startswith(_DIRECTIVE_STARTS):
        text = _LEADING_DIRECTIVES.sub("", text, count=1)
    if text.isascii():
        data = text.encode("utf-8").translate(_TO_SPACE)
    else:
        plain = text.replace("\n", " ") if "\n" in text else text
        if not plain.isprintable():
            return " ".join(text.split()).encode("utf-8", "surrogatepass")
        data = plain.encode("utf-8")
    if b"  " not in data:
        return data.strip(b" ")
    # What lies between two places where spaces meet has single spaces inside, and at most one
    # at either end.
    pieces = []
    for run in data.split(b"  "):
        piece = run.strip(b" ")
        if piece:
            pieces.append(piece)
    return b" ".join(pieces)


def normalized_hash(text: str, slice_chars: int = SLICE_CHARS) -> int:
    """`text_hash(normalize(text))`, made odd, or 0 when the normalized text is empty (rules
    never fire on empty text); a long text is hashed slice by slice, never split whole."""
    if len(text) <= slice_chars:
        data = normalized_utf8(text)
        return digest64(data) | 1 if data else 0
    hasher = xxhash.xxh3_64()
    empty = True
    for words in _normalized_slices(text, slice_chars):
        if not empty:
            hasher.update(b" ")
        hasher.update(words.encode("utf-8", "surrogatepass"))
        empty = False
    return 0 if empty else hasher.intdigest() | 1


def normalized_crc(text: str, slice_chars: int = SLICE_CHARS) -> tuple[int, int]:
    """(CRC-32, byte length) of the UTF-8 of `normalize(text)`. A CRC extends over what
    follows (`zlib.crc32(more, crc)`), so a text joined from parts is checked against one
    number the parts built up, with none of their texts kept."""
    crc = 0
    size = 0
    for words in _normalized_slices(text, slice_chars):
        crc, size = crc_join(crc, size, words.encode("utf-8", "surrogatepass"))
    return crc, size


def crc_join(crc: int, size: int, data: bytes) -> tuple[int, int]:
    """(CRC-32, byte length) of what `crc` and `size` covered (nothing when `size` is 0), one
    space, then `data`."""
    if size:
        crc = zlib.crc32(b" ", crc)
        size += 1
    return zlib.crc32(data, crc), size + len(data)


def normalized_prefix(text: str, length: int, slice_chars: int = SLICE_CHARS) -> str:
    """`normalize(text)[:length]`, reading no more of a long text than it needs."""
    if len(text) <= slice_chars:
        return normalize(text)[:length]
    parts: list[str] = []
    size = 0
    for words in _normalized_slices(text, slice_chars):
        if size >= length:
            break
        if parts:
            parts.append(" ")
            size += 1
        parts.append(words)
        size += len(words)
    return "".join(parts)[:length]


def _normalized_slices(text: str, slice_chars: int) -> Iterator[str]:
    """The words of `normalize(text)` in order, space-joined per slice; slices end at a space,
    so that no word is cut in two."""
    start = 0
    if text.startswith(_DIRECTIVE_STARTS):
        directives = _LEADING_DIRECTIVES.match(text)
        if directives is not None:
            start = directives.end()
    size = len(text)
    while start < size:
        end = start + slice_chars
        if end < size:
            space = _SPACE.search(text, end)
            end = space.start() if space is not None else size
        words = text[start:end].split()
        if words:
            yield " ".join(words)
        start = end


def repetition(
    text: str, min_unit: int, slice_chars: int = SLICE_CHARS
) -> tuple[int, int] | None:
    """(copies, unit length) when `text` is k >= 2 verbatim copies of one unit, whitespace between;
    the largest such k whose unit has at least `min_unit` characters.

    Works on the text with whitespace removed, whose k copies of the unit become an exact
    period; each candidate k is then checked verbatim on the original text, since removing
    whitespace could make different units look alike.
    """
    stripped = text.strip()
    if len(stripped) < 2 * min_unit:
        return None
    # The second copy starts with the unit's first `min_unit` characters, verbatim; most
    # replies fail this one search and are never looked at again.
    if stripped.find(stripped[: max(min_unit, 1)], 1) < 0:
        return None
    # A long text is looked at in place before a copy of it without whitespace is made.
    if len(stripped) > slice_chars and not _may_repeat(stripped, min_unit, slice_chars):
        return None
    dense_length, copies = _dense_copies(stripped, slice_chars)
    for k in _divisors_descending(copies):
        unit = _verbatim_unit_length(stripped, dense_length // k, k, min_unit, slice_chars)
        if unit > 0 and unit >= min_unit:
            return k, unit
    return None


def _may_repeat(text: str, min_unit: int, slice_chars: int) -> bool:
    """Whether a second verbatim copy of a unit the text starts and ends with can start
    somewhere: what every k >= 2 copies have (the unit is `text[:end]`, `end` just after a
    non-space character, its next copy starts after whitespace at `start`, the last copy ends
    the text). It needs no copy of the text: a reply of 20 MB whose first words recur is
    rejected without the 20 MB that `_dense_copies` takes."""
    head = text[: max(min_unit, 1)]
    size = len(text)
    start = text.find(head, 1)
    while start >= 0:
        end = start
        while end > 0 and text[end - 1].isspace():
            end -= 1
        if (
            end >= max(min_unit, 1)
            and start + end <= size
            and text.endswith(text[max(0, end - 64) : end])
            and text.startswith(text[: min(end, 64)], start)
            and _same_text(text, 0, start, end, slice_chars)
        ):
            return True
        start = text.find(head, start + 1)
    return False


def _dense_copies(text: str, slice_chars: int) -> tuple[int, int]:
    """(length, copies): how many copies of its primitive root the text without whitespace is.

    The root's length is the first place >= 1 where the first half of the text occurs again,
    if that place makes the whole text periodic: were the root shorter than that place, the two
    periods together would make the root itself a power (Fine and Wilf), so it would not be
    the root. This needs half a copy of the text where `(dense + dense).find(dense, 1)` needs two.
    """
    dense = text.translate(_DELETE_SPACES)
    size = len(dense)
    half = size // 2
    if half == 0:
        return size, 1
    period = dense.find(dense[:half], 1)
    if period < 0 or period > half or size % period:
        return size, 1
    if not _repeats_from(dense, period, period + half, slice_chars):
        return size, 1
    return size, size // period


def _divisors_descending(number: int) -> list[int]:
    """The divisors of `number` that are at least 2, largest first."""
    small: list[int] = []
    large: list[int] = []
    divisor = 1
    while divisor * divisor <= number:
        if number % divisor == 0:
            small.append(divisor)
            if divisor * divisor != number:
                large.append(number // divisor)
        divisor += 1
    return [d for d in large + small[::-1] if d >= 2]


def _verbatim_unit_length(
    text: str, dense_length: int, copies: int, min_unit: int, slice_chars: int
) -> int:
    """The length of the unit if `text` (stripped) is `copies` verbatim copies of its first
    `dense_length` non-space characters with whitespace between, else 0. A unit shorter than
    `min_unit` is not looked at: it would not count."""
    end = _after_non_spaces(text, dense_length, slice_chars)
    if end < min_unit:
        return 0
    second = _NON_SPACE.search(text, end)
    if second is None:
        return 0
    step = second.start()
    # Copies with equal separators make the text periodic, checked in one pass.
    if len(text) == copies * step - (step - end) and _repeats_from(text, step, step, slice_chars):
        return end
    position = end
    for _ in range(1, copies):
        start = _NON_SPACE.search(text, position)
        if start is None or not _same_text(text, 0, start.start(), end, slice_chars):
            return 0
        position = start.start() + end
    return end


def _after_non_spaces(text: str, count: int, slice_chars: int) -> int:
    """The index just after the `count`-th (>= 1) non-space character of `text`."""
    start = 0
    size = len(text)
    while start < size:
        end = min(start + slice_chars, size)
        found = len(text[start:end].translate(_DELETE_SPACES))
        if found >= count:
            for index in range(start, end):
                if not text[index].isspace():
                    count -= 1
                    if count == 0:
                        return index + 1
        count -= found
        start = end
    return size


def _repeats_from(text: str, period: int, start: int, slice_chars: int) -> bool:
    """Every character from `start` on equals the one `period` before it."""
    for begin in range(start, len(text), slice_chars):
        end = min(begin + slice_chars, len(text))
        if not text.startswith(text[begin - period : end - period], begin):
            return False
    return True


def _same_text(text: str, first: int, second: int, length: int, slice_chars: int) -> bool:
    """`text[second:second + length] == text[first:first + length]`, compared slice by slice."""
    for offset in range(0, length, slice_chars):
        piece = text[first + offset : first + min(offset + slice_chars, length)]
        if not text.startswith(piece, second + offset):
            return False
    return True
