"""Safe file names for session and agent ids: no id names a file outside the folder."""

from __future__ import annotations

import re

from stream.engine.text import digest64

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def file_name(session_id: str) -> str:
    """A safe file name for an id; ids that had to change get a hash against clashes."""
    safe = _UNSAFE.sub("_", session_id)[:100]
    if safe and safe == session_id and not safe.startswith("."):
        return safe
    return f"_{safe}-{digest64(session_id.encode('utf-8', 'surrogatepass')):016x}"
