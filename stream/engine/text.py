"""Text helpers shared by the rules: visible text, normalization, hashing, repetition."""

from __future__ import annotations

import re
from typing import Final

import xxhash

# Reply directives are routing hints for the gateway, not words the user sees; a mirror
# that drops them is still the same message.
_LEADING_DIRECTIVES: Final = re.compile(
    r"^\s*(?:\[\[\s*(?:reply_to_current|reply_to\s*:[^\]]*|audio_as_voice)\s*\]\]\s*)+"
)


def digest64(data: bytes) -> int:
    """A 64-bit content hash: state keeps hashes, never texts. XXH3 hashes a whole entry in a
    fifteenth of the time blake2b took, which was as long as parsing it."""
    return xxhash.xxh3_64_intdigest(data)


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
    if text.startswith(("[", " ", "\t", "\n", "\r")):
        text = _LEADING_DIRECTIVES.sub("", text, count=1)
    return " ".join(text.split())


def repetition(text: str, min_unit: int) -> tuple[int, int] | None:
    """(copies, unit length) when `text` is k >= 2 verbatim copies of one unit, whitespace between.

    Works on the text with whitespace removed, where copies become an exact period that
    `(s + s).find(s, 1)` finds in linear time; each candidate is then checked verbatim on the
    original text, since removing whitespace could make different units look alike.
    """
    stripped = text.strip()
    if len(stripped) < 2 * min_unit:
        return None
    # The second copy starts with the unit's first `min_unit` characters, verbatim; most
    # replies fail this one search and are never split.
    if stripped.find(stripped[: max(min_unit, 1)], 1) < 0:
        return None
    dense = "".join(stripped.split())
    period = (dense + dense).find(dense, 1)
    if period >= len(dense):
        return None
    copies = len(dense) // period
    starts = _dense_to_original(stripped)
    for k in range(copies, 1, -1):
        if copies % k:
            continue
        unit = _verbatim_unit(stripped, starts, len(dense) // k, k)
        if unit is not None and len(unit) >= min_unit:
            return k, len(unit)
    return None


def _dense_to_original(text: str) -> list[int]:
    return [i for i, ch in enumerate(text) if not ch.isspace()]


def _verbatim_unit(text: str, starts: list[int], dense_len: int, k: int) -> str | None:
    first = text[starts[0] : starts[dense_len - 1] + 1]
    for i in range(1, k):
        piece = text[starts[i * dense_len] : starts[(i + 1) * dense_len - 1] + 1]
        if piece != first:
            return None
    return first
