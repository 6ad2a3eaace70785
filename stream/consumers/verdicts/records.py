"""The worker's outputs as the verdict index reads them (docs/outputs.md).

A clean record is a kept entry, keyed by its session: processed. An alert with action
`dropped` names the copy (`entry_id`) and what it repeats (`related_entry_id`), once per drop:
the copy is processed and dropped. Any other alert naming an entry marks it processed. A
redelivery is dropped under the id of the entry that was kept, so it is never taken for a copy.
A record that is not what the worker writes is skipped: the index stays what it was.
"""

from __future__ import annotations

import orjson

from stream.consumers.verdicts.index import VerdictIndex

REDELIVERY = "redelivery"


def read_clean(index: VerdictIndex, key: bytes | None, value: bytes | None, at: float) -> bool:
    """Whether the record was one the index could read."""
    if key is None or value is None:
        return False
    try:
        entry = orjson.loads(value)
        session_id = key.decode("utf-8")
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        return False
    entry_id = entry.get("id") if isinstance(entry, dict) else None
    if not isinstance(entry_id, str):
        return False
    index.processed(session_id, entry_id, at)
    return True


def read_alert(index: VerdictIndex, value: bytes | None, at: float) -> bool:
    if value is None:
        return False
    try:
        alert = orjson.loads(value)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(alert, dict):
        return False
    session_id, entry_id = alert.get("session_id"), alert.get("entry_id")
    if not isinstance(session_id, str) or not isinstance(entry_id, str):
        return False
    repeats = alert.get("related_entry_id")
    if (alert.get("action") == "dropped" and alert.get("kind") != REDELIVERY
            and isinstance(repeats, str) and repeats != entry_id):
        index.dropped(session_id, entry_id, repeats, at)
    else:
        index.processed(session_id, entry_id, at)
    return True
