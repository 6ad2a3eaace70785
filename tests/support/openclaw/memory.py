"""OpenClaw's own memory over a real gateway's state: the session-memory hook's file after a
reset, `openclaw memory index`, and `openclaw memory search --json`, with each hit's whole
chunk read back from OpenClaw's index.

The search runs offline: on 2026.9+ with `memory.search.provider: "none"` (full-text only), on
2026.5.12 with `agents.defaults.memorySearch` and no provider (it falls back to full text, as
no embedding provider is reachable). One index holds the three places a conversation can be
found: our files (named in extraPaths), the session-memory file in `<workspace>/memory/`, and
OpenClaw's `sessions` source (the raw transcripts); a hit says which by its path and source.
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.openclaw import shapes
from tests.support.openclaw.gateway import Gateway, GatewayError

SEARCH_TIMEOUT = 120.0
_WORDS = re.compile(r"[^\W_]+")  # roughly FTS5 unicode61's tokens


@dataclass(frozen=True)
class Hit:
    """One result of `openclaw memory search --json`, with the whole chunk it cites."""

    path: str
    source: str
    start_line: int
    end_line: int
    text: str  # the chunk as OpenClaw indexed it (the snippet is cut at a few hundred chars)

    def count(self, phrase: str) -> int:
        return _flat(self.text).count(_flat(phrase))


def search_config(gateway: Gateway, ours: Path, out: Path) -> Path:
    """The gateway's openclaw.json plus the memory search over our folder (extraPaths), the
    workspace's memory folder and the `sessions` source, written to `out`."""
    config = json.loads(gateway.config_path.read_text())
    search = {"sources": ["memory", "sessions"], "extraPaths": [str(ours)]}
    if gateway.release.has_catalog_refresh:  # 2026.9+: the memory section, a full-text mode
        config["memory"] = {"search": {**search, "provider": "none"}}
    else:  # 2026.5.12: per agent, and transcripts behind an experimental switch
        config["agents"]["defaults"]["memorySearch"] = {
            **search, "experimental": {"sessionMemory": True}}
    out.write_text(json.dumps(config, indent=2))
    return out


def reset(gateway: Gateway, session_key: str | None, timeout: float = 60.0) -> Path:
    """A reset; the file the session-memory hook wrote for it, once it is there (it writes in
    the background). `sessions.reset` of `session_key` through the gateway; with None, a
    `/new` DM from the Telegram user (2026.5.12 asks a CLI client for an operator scope it was
    not paired with to reset), which resets agent:main:main."""
    folder = gateway.home / "workspace" / "memory"
    before = set(folder.glob("*.md")) if folder.exists() else set()
    if session_key is None:
        gateway.telegram.dm("/new")
    else:
        gateway.cli_json("gateway", "call", "sessions.reset", "--params",
                         json.dumps({"key": session_key}), "--json", "--url", gateway.url,
                         "--token", gateway.token)
    found: list[Path] = []

    def written() -> bool:
        new = sorted(set(folder.glob("*.md")) - before) if folder.exists() else []
        found[:] = [path for path in new if path.stat().st_size > 0]
        return bool(found)

    gateway.wait_for(written, timeout, f"session-memory's file for {session_key}")
    time.sleep(0.5)  # written in one go, but let a slow write finish
    return found[0]


def index(gateway: Gateway, config: Path) -> None:
    """`openclaw memory index --force`; once more when the workspace lock was busy."""
    for attempt in range(2):
        try:
            gateway.cli("memory", "index", "--force", timeout=SEARCH_TIMEOUT, config=config)
            return
        except GatewayError as error:
            if attempt or "lock" not in str(error):
                raise


def search(gateway: Gateway, config: Path, query: str) -> list[Hit]:
    """`openclaw memory search QUERY --json`, every hit (no score floor), chunks read back."""
    found = gateway.cli_json("memory", "search", query, "--json", "--max-results", "100",
                             "--min-score", "0", timeout=SEARCH_TIMEOUT, config=config)
    chunks = _chunks(gateway)
    hits = []
    for result in found.get("results", []):
        key = (result["path"], result.get("source", "memory"), result["startLine"],
               result["endLine"])
        snippet = result.get("snippet", "")
        # The pieces of a line longer than a chunk share its line numbers: the snippet
        # (the chunk's start) says which piece this is.
        start = _flat(snippet)[:80]
        texts = [text for text in chunks.get(key, []) if start in _flat(text)]
        hits.append(Hit(*key, texts[0] if texts else snippet))
    return hits


def _chunks(gateway: Gateway) -> dict[tuple[str, str, int, int], list[str]]:
    """Every chunk of the index: 2026.9+ keeps it in the agent's store, 2026.5.12 in
    ~/.openclaw/memory/<agent>.sqlite."""
    for db, table in ((gateway.store_path, "memory_index_chunks"),
                      (gateway.state_dir / "memory" / "main.sqlite", "chunks")):
        if not db.exists():
            continue
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
            tables = {row[0] for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if table in tables:
                rows = connection.execute(
                    f"SELECT path, source, start_line, end_line, text FROM {table}")
                chunks: dict[tuple[str, str, int, int], list[str]] = {}
                for path, source, start, end, text in rows:
                    chunks.setdefault((path, source, start, end), []).append(text)
                return chunks
    return {}


def where(hit: Hit, gateway: Gateway, ours: Path) -> str:
    """"ours" (a file of our folder), "session-memory" (the hook's file in the workspace) or
    "sessions" (OpenClaw's transcripts source); "other" for anything else."""
    if hit.source == "sessions":
        return "sessions"
    workspace = gateway.home / "workspace"
    path = (workspace / hit.path).resolve()
    if path.is_relative_to(ours.resolve()):
        return "ours"
    if path.is_relative_to((workspace / "memory").resolve()):
        return "session-memory"
    return "other"


def phrase(entry: dict[str, Any], length: int = 60) -> str:
    """What a person would search a reply by: its first words (a whole reply can be longer
    than a chunk)."""
    return _flat(shapes.text(entry))[:length]


def _flat(text: str) -> str:
    return " ".join(text.split())


def chunk_texts(gateway: Gateway, ours: Path) -> list[str]:
    """The chunks OpenClaw indexed from our folder."""
    workspace = gateway.home / "workspace"
    return [text for (path, source, _, _), texts in _chunks(gateway).items() for text in texts
            if source == "memory" and (workspace / path).resolve().is_relative_to(ours.resolve())]


def findable(text: str, chunks: list[str]) -> bool:
    """Every word of `text` is a whole word of a chunk (the full-text index finds words, and a
    chunk boundary inside a line cuts the word there in two); a text shorter than a chunk is
    in one chunk as a whole too."""
    flat, joined = _flat(text), [_flat(chunk) for chunk in chunks]
    words = {word for chunk in chunks for word in _WORDS.findall(chunk.lower())}
    whole = len(flat) > 1200 or any(flat in chunk for chunk in joined)
    return whole and set(_WORDS.findall(flat.lower())) <= words


def report(rows: dict[str, dict[str, Any]]) -> str:
    """The side-by-side table the README quotes: per reply phrase, hits and copies per place."""
    places = ("ours", "sessions", "session-memory")
    lines = ["phrase | " + " | ".join(f"{p}: hits/copies" for p in places)]
    for phrase, counts in rows.items():
        cells = [f"{counts[p][0]}/{counts[p][1]}" for p in places]
        lines.append(f"{phrase[:40]} | " + " | ".join(cells))
    return "\n".join(lines)


@dataclass
class MemoryRun:
    """Our memory files from the clean topic, the session-memory file of a reset, and the
    searches over both and OpenClaw's sessions source."""

    ours: Path  # our folder, named in extraPaths
    files: dict[str, str]  # our memory files by session id (file name), their text
    hook_file: Path  # what the session-memory hook wrote on the reset
    hits: dict[str, list[Hit]]  # per query
    our_chunks: list[str]
    gateway: Gateway

    def counts(self, query: str, phrase: str) -> dict[str, tuple[int, int]]:
        """Per place: (hits holding `phrase`, copies of it in those hits)."""
        counts = {place: (0, 0) for place in ("ours", "sessions", "session-memory", "other")}
        for hit in self.hits[query]:
            copies = hit.count(phrase)
            if copies:
                place = where(hit, self.gateway, self.ours)
                hits, total = counts[place]
                counts[place] = (hits + 1, total + copies)
        return counts


def run_memory(gateway: Gateway, ours: Path, work: Path, hook_file: Path,
               queries: list[str]) -> MemoryRun:
    """With our files in `ours` (the memory writer over the clean topic) and session-memory's
    `hook_file` (`reset`): one index, and `queries` searched."""
    config = search_config(gateway, ours, work / "openclaw-memory.json")
    index(gateway, config)
    hits = {query: search(gateway, config, query) for query in queries}
    files = {path.stem: path.read_text() for path in sorted(ours.glob("*.md"))}
    return MemoryRun(ours, files, hook_file, hits, chunk_texts(gateway, ours), gateway)


def reply_rows(run: MemoryRun, query: str, transcripts: dict[str, list[bytes]],
               clean: dict[str, list[bytes]]) -> dict[str, dict[str, tuple[int, int]]]:
    """Per model reply (its phrase): the hits and copies of it per place, and under
    "expected" what our files must show: one hit, holding the reply as often as the clean
    topic does (the engine keeps a mirror sent again after other words: a second delivery)."""
    rows = {}
    for session, lines in transcripts.items():
        kept = [_flat(shapes.text(e)) for e in shapes.parsed(clean.get(session, []))
                if shapes.role(e) == "assistant"]
        for reply in shapes.replies(shapes.parsed(lines)):
            text = phrase(reply)
            counts = run.counts(query, text)
            counts["expected"] = (1, sum(k.startswith(text) for k in kept))
            rows[text] = counts
    return rows


def documented_wiring(docs: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """The shell commands (lines starting `openclaw `) and the JSON config blocks of the
    wiring `docs` (docs/memory.md) tells a user to copy."""
    text = docs.read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)
    commands = [line.split("  #")[0].strip() for kind, body in blocks if kind == "sh"
                for line in body.splitlines() if line.startswith("openclaw ")]
    configs = [json.loads(body) for kind, body in blocks if kind == "json"]
    return commands, configs


def apply_wiring(gateway: Gateway, docs: Path, out: Path) -> dict[str, Any]:
    """The documented wiring applied to a copy of the gateway's config by OpenClaw itself (its
    `hooks disable` and `config set`, then its `config validate`); the config it leaves."""
    commands, configs = documented_wiring(docs)
    config = json.loads(gateway.config_path.read_text())
    for block in configs:
        config = _merged(config, block)
    out.write_text(json.dumps(config, indent=2))
    for command in commands:
        gateway.cli(*shlex.split(command)[1:], config=out)
    gateway.cli("config", "validate", config=out)
    return json.loads(out.read_text())


def _merged(base: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged
