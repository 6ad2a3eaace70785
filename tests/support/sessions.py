"""Session files for the integration tests: the real fixtures plus the four bug shapes."""

from __future__ import annotations

from pathlib import Path

from stream.sources.session_files import find_session_files, open_lines, session_id_of
from tests.support.builders import (
    THINKING_REJECTED,
    assistant,
    custom,
    encode,
    header,
    mirror,
    user,
)
from tests.support.data import FIXTURES


def _write(folder: Path, session_id: str, entries: list) -> Path:
    path = folder / f"{session_id}.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in encode([header(session_id), *entries])))
    return path


def cli_copies(session_id: str) -> list:
    """Bug shape (b): a thinking reply, a cache-ttl entry, then its api:"cli" copy, 30 times."""
    entries: list = []
    for turn in range(30):
        reply = f"Answer number {turn}: the deployment finished and all checks passed."
        entries += [
            user(f"question {turn}", parent=None) if turn == 0 else user(f"question {turn}"),
            assistant(reply, thinking="let me think"),
            custom("openclaw.cache-ttl"),
            assistant(reply, api="cli", provider="claude-cli", model="claude-opus-4-5"),
        ]
    unit = "I will repeat myself because I saw my replies twice. "
    entries += [user("why?"), assistant(unit * 4)]
    return entries


def cleaned_children(session_id: str) -> list:
    """Bug shape (a): each raw [thinking, text] reply followed by its cleaned [text] child."""
    first = assistant("The answer is 42.", thinking="hmm")
    second = assistant("Another answer.", thinking="hmm again")
    return [
        user("q1", parent=None),
        first,
        # cleaned copies carry their raw reply's usage: one model turn each, written twice
        assistant("The answer is 42.", parent=first["id"], usage=first["message"]["usage"]),
        user("q2"),
        second,
        assistant("Another answer.", parent=second["id"], usage=second["message"]["usage"]),
        user("q3"),
        assistant("The answer is 42."),
        assistant("A child with other text.", parent=None),
    ]


def positional_mirror(session_id: str) -> list:
    """Bug shape (c): a mirrored turn re-emitted after its snapshot gained a reasoning record."""
    scope = "agent:main:run-7"
    return [
        user("hello", parent=None, idempotency_key=f"{scope}:user:0"),
        mirror("Hi! How can I help?", idempotency_key=f"{scope}:assistant:1"),
        user("hello", idempotency_key=f"{scope}:user:0"),
        mirror("Thinking about it first.", idempotency_key=f"{scope}:assistant:1"),
        mirror("Hi! How can I help?", idempotency_key=f"{scope}:assistant:2"),
        user("same words", idempotency_key="key-a"),
        user("same words", idempotency_key="key-b"),
    ]


def echoes_and_rejections(session_id: str) -> list:
    """Bug shape (d): a subagent echo tagged anthropic, then a thinking-rejection loop."""
    entries = [
        user("go", parent=None),
        assistant("Done: 3 files changed.", thinking="plan"),
        assistant("Done: 3 files changed.", usage=None),
    ]
    for attempt in range(3):
        entries += [user(f"retry {attempt}"), assistant(None, error=THINKING_REJECTED, usage=None)]
    return entries


SHAPES = {
    "shape-b-cli-copies": cli_copies,
    "shape-a-cleaned-children": cleaned_children,
    "shape-c-positional-mirror": positional_mirror,
    "shape-d-echo-rejections": echoes_and_rejections,
}


def write_sessions(folder: Path) -> list[Path]:
    """The fixture sessions and the bug shapes, plus one file with bad lines in it."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [_write(folder, name, build(name)) for name, build in SHAPES.items()]
    bad = folder / "bad-lines.jsonl"
    bad.write_bytes(
        b'{"type":"session","version":3,"id":"bad-lines"}\n'
        b"not json at all\n"
        b'{"type":"message","message":{"role":"user","content":"no id"}}\n'
        b"\xff\xfe\x00 binary\n"
        b'{"type":"message","id":"ok1","parentId":null,"message":{"role":"user","content":"hi"}}\n'
    )
    return [*find_session_files(FIXTURES), *paths, bad]


def keyed_lines(paths: list[Path]) -> list[tuple[bytes, bytes]]:
    records = []
    for path in paths:
        lines = list(open_lines(path))
        session_id = session_id_of(path, lines[0][1] if lines else None)
        records += [(session_id.encode(), raw) for _, raw in lines]
    return records
