"""A reliability workload: real corpus sessions, renamed to many, with every kind of duplicate
injected the way harnesses write them."""

from __future__ import annotations

import random
from collections.abc import Iterator

import orjson

from stream.sources.session_files import find_session_files, open_lines
from tests.support.data import CORPUS


def corpus_sessions() -> list[list[bytes]]:
    """Each corpus session's lines, header first."""
    return [[raw for _, raw in open_lines(path)] for path in find_session_files(CORPUS)]


def _text_of(value: dict) -> str | None:
    content = value.get("message", {}).get("content")
    if isinstance(content, list):
        texts = [b["text"] for b in content if b.get("type") == "text" and b.get("text")]
        return "\n".join(texts) or None
    return None


def _duplicates(value: dict, rng: random.Random, new_id) -> Iterator[dict]:
    """Zero or more harness duplicates of one assistant entry, in transcript order."""
    message = value["message"]
    text = _text_of(value)
    if text is None or rng.random() > 0.35:
        return
    copy = {"type": "text", "text": text}
    kind = rng.choice(["mirror", "cli", "child", "echo"])
    base = {"type": "message", "timestamp": value.get("timestamp")}
    if kind == "mirror":
        yield {**base, "id": new_id(), "parentId": value["id"], "message": {
            "role": "assistant", "content": [copy], "api": "openai-responses",
            "provider": "openclaw", "model": "delivery-mirror", "stopReason": "stop"}}
    elif kind == "cli":
        ttl = {"type": "custom", "customType": "openclaw.cache-ttl", "id": new_id(),
               "parentId": value["id"], "data": {}}
        yield ttl
        yield {**base, "id": new_id(), "parentId": ttl["id"], "message": {
            "role": "assistant", "content": [copy], "api": "cli", "provider": "claude-cli",
            "model": message.get("model"), "stopReason": "stop"}}
    elif kind == "child":
        yield {**base, "id": new_id(), "parentId": value["id"], "message": {
            **message, "content": [copy]}}
    elif any(b.get("type") == "thinking" for b in message.get("content") or []):
        yield {**base, "id": new_id(), "parentId": value["id"], "message": {
            "role": "assistant", "content": [copy], "api": message.get("api"),
            "provider": message.get("provider"), "model": message.get("model"),
            "stopReason": "stop"}}


def session_with_duplicates(lines: list[bytes], name: str, rng: random.Random) -> list[bytes]:
    counter = iter(range(10**9))

    def new_id() -> str:
        return f"dup-{name}-{next(counter)}"

    out: list[bytes] = []
    for raw in lines:
        out.append(raw)
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(value, dict):
            continue
        if value.get("message", {}).get("role") == "assistant":
            out += [orjson.dumps(dup) for dup in _duplicates(value, rng, new_id)]
        if rng.random() < 0.03:
            out.append(raw)  # a redelivered line
    return out


def workload(entries: int, sessions: int, seed: int = 7) -> list[tuple[bytes, bytes]]:
    """About `entries` keyed records over `sessions` sessions, interleaved across sessions
    and in order within each."""
    rng = random.Random(seed)
    corpus = corpus_sessions()
    per_session = max(1, entries // sessions)
    streams: list[tuple[bytes, list[bytes]]] = []
    for number in range(sessions):
        source = corpus[number % len(corpus)]
        name = f"chaos-{number}"
        lines = session_with_duplicates(source, name, rng)[:per_session]
        streams.append((name.encode(), lines))
    records: list[tuple[bytes, bytes]] = []
    positions = [0] * len(streams)
    live = [i for i, (_, lines) in enumerate(streams) if lines]
    while live:
        i = rng.choice(live)
        key, lines = streams[i]
        records.append((key, lines[positions[i]]))
        positions[i] += 1
        if positions[i] == len(lines):
            live.remove(i)
    return records

