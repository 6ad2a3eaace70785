"""What the benchmarks feed the engine and the brokers: the real corpus, replayed, and synthetic
sessions for scale runs.

A workload is a list of (session id, raw entry) in stream order. Sessions are interleaved the way
a live stream of many concurrent sessions interleaves them (a seeded uniform shuffle of whole
sessions' entries), and every session's own entries keep their order.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from stream.sources.session_files import find_session_files, open_lines, session_id_of

# The anonymized real sessions the tests use too (tests/data/corpus/README.md).
CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "corpus"

Entry = tuple[str, bytes]


@dataclass(frozen=True)
class CorpusSession:
    session_id: str
    lines: tuple[bytes, ...]


def load_corpus(root: Path = CORPUS) -> list[CorpusSession]:
    """Every session file under `root` (the .jsonl.gz files of tests/data/corpus)."""
    if not root.is_dir():
        raise FileNotFoundError(f"no corpus at {root}")
    sessions = []
    for path in find_session_files(root):
        lines = tuple(body for _, body in open_lines(path))
        if lines:
            sessions.append(CorpusSession(session_id_of(path, lines[0]), lines))
    if not sessions:
        raise FileNotFoundError(f"no session files under {root}")
    return sessions


def interleave(sessions: Sequence[Sequence[bytes]], ids: Sequence[str], seed: int) -> list[Entry]:
    """A uniformly random interleaving of whole sessions, each in its own order."""
    order = [i for i, lines in enumerate(sessions) for _ in lines]
    random.Random(seed).shuffle(order)
    cursors = [0] * len(sessions)
    out: list[Entry] = []
    for i in order:
        out.append((ids[i], sessions[i][cursors[i]]))
        cursors[i] += 1
    return out


def contiguous(sessions: Sequence[Sequence[bytes]], ids: Sequence[str]) -> list[Entry]:
    """Session after session, as `session-stream produce` publishes files."""
    return [(sid, raw) for sid, lines in zip(ids, sessions, strict=True) for raw in lines]


def corpus_replay(
    entries: int, corpus: Sequence[CorpusSession] | None = None, seed: int = 1, *,
    interleaved: bool = True, copies: int | None = None,
) -> list[Entry]:
    """`entries` corpus entries: copy c of session X is renamed `s{c}-{X}`, as many copies as
    it takes (or `copies`, for as many concurrent sessions); the interleaved stream is cut after
    `entries` (every session keeps a prefix)."""
    corpus = corpus if corpus is not None else load_corpus()
    per_copy = sum(len(s.lines) for s in corpus)
    copies = copies or max(1, -(-entries // per_copy))
    ids = [f"s{c}-{s.session_id}" for c in range(copies) for s in corpus]
    lines = [s.lines for _ in range(copies) for s in corpus]
    stream = interleave(lines, ids, seed) if interleaved else contiguous(lines, ids)
    return stream[:entries]


# ---------------------------------------------------------------------------------------------
# Synthetic sessions: user -> assistant (thinking, text, tool call) -> toolResult -> assistant
# (final text) -> sometimes a delivery mirror of that text (which the engine drops), per turn.

_SYLLABLES = (
    "ka", "zu", "mi", "ro", "te", "va", "lo", "qi", "ne", "da", "fo", "gu", "xe", "wi", "po",
    "sha", "bri", "tor", "men", "ul", "ax", "ien", "ou", "yr",
)
_MODEL = (
    '"api":"openai-completions","provider":"openrouter","model":"stepfun/step-3.5-flash:free"'
)
_ZERO_COST = '{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}'


class _Words:
    """A seeded pool of pseudo-words; `text(n)` returns about n characters of distinct text."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        words = [
            "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(4096)
        ]
        self._pool = " ".join(rng.choice(words) for _ in range(200_000))
        self._rng = rng

    def text(self, size: int) -> str:
        start = self._rng.randrange(0, len(self._pool) - size - 1)
        start = self._pool.find(" ", start) + 1
        return self._pool[start : start + size].strip() or "x"


class SyntheticSession:
    """Entries of one synthetic session, generated on demand with realistic sizes."""

    # Kinds of entry in the order they recur; the header comes first, once.
    TURN = ("user", "assistant_tool", "tool_result", "assistant_text", "mirror")
    # Share of turns whose final reply the gateway mirrors into the transcript.
    MIRROR_RATE = 0.25

    def __init__(self, session_id: str, words: _Words, rng: random.Random) -> None:
        self.session_id = session_id
        self._words = words
        self._rng = rng
        self._ids = itertools.count(1)
        self._parent: str | None = None
        self._call = ""
        self._last_text = ""
        self._ms = 1_772_000_000_000 + rng.randrange(10**9)
        self._started = False
        self._turn = itertools.cycle(self.TURN)

    def __iter__(self) -> Iterator[bytes]:
        while True:
            yield self.next()

    def next(self) -> bytes:
        if not self._started:
            self._started = True
            # not orjson.dumps of the whole: its bytes keep a buffer of about 4 KB, which
            # held 4 GB in the bench for the recovery section's million headers
            return (f'{{"type":"session","version":3,"id":{orjson.dumps(self.session_id).decode()},'
                    f'"timestamp":"2026-03-15T06:04:17.150Z","cwd":"/home/user"}}').encode()
        kind = next(self._turn)
        if kind == "mirror" and self._rng.random() >= self.MIRROR_RATE:
            kind = next(self._turn)
        return getattr(self, "_" + kind)()

    def _head(self, parent: str | None = None) -> str:
        entry_id = f"{next(self._ids):08x}"
        parent = self._parent if parent is None else parent
        self._parent = entry_id
        self._ms += self._rng.randrange(50, 30_000)
        parent_json = "null" if parent is None else f'"{parent}"'
        return (f'{{"type":"message","id":"{entry_id}","parentId":{parent_json},'
                f'"timestamp":"2026-03-15T06:04:21.885Z","message":')

    def _text(self, low: int, high: int) -> str:
        return orjson.dumps(self._words.text(self._rng.randint(low, high))).decode()

    def _user(self) -> bytes:
        head = self._head()
        body = f'{{"role":"user","content":[{{"type":"text","text":{self._text(60, 600)}}}],'
        return f'{head}{body}"timestamp":{self._ms}}}}}'.encode()

    def _usage(self) -> str:
        i, o = self._rng.randint(10, 30_000), self._rng.randint(10, 2_000)
        return (f'"usage":{{"input":{i},"output":{o},"cacheRead":0,"cacheWrite":0,'
                f'"totalTokens":{i + o},"cost":{_ZERO_COST}}}')

    def _assistant_tool(self) -> bytes:
        head = self._head()
        self._call = f"call_{self._rng.getrandbits(96):024x}"
        content = (
            f'[{{"type":"thinking","thinking":{self._text(100, 1200)},'
            f'"thinkingSignature":"reasoning"}},'
            f'{{"type":"text","text":{self._text(20, 200)}}},'
            f'{{"type":"toolCall","id":"{self._call}","name":"exec",'
            f'"arguments":{{"command":{self._text(10, 120)}}}}}]'
        )
        return (f'{head}{{"role":"assistant","content":{content},{_MODEL},{self._usage()},'
                f'"stopReason":"toolUse","timestamp":{self._ms}}}}}').encode()

    def _tool_result(self) -> bytes:
        head = self._head()
        # Tool output has a heavy tail: mostly short, sometimes a whole file.
        size = int(min(60_000, self._rng.lognormvariate(6.5, 1.2)))
        return (f'{head}{{"role":"toolResult","toolCallId":"{self._call}","toolName":"exec",'
                f'"content":[{{"type":"text","text":{self._text(10, max(11, size))}}}],'
                f'"details":{{"status":"completed","exitCode":0,"durationMs":24}},'
                f'"isError":false,"timestamp":{self._ms}}}}}').encode()

    def _assistant_text(self) -> bytes:
        head = self._head()
        self._last_text = self._text(40, 900)
        return (f'{head}{{"role":"assistant","content":[{{"type":"text","text":'
                f'{self._last_text}}}],{_MODEL},{self._usage()},"stopReason":"stop",'
                f'"timestamp":{self._ms}}}}}').encode()

    def _mirror(self) -> bytes:
        head = self._head()
        return (f'{head}{{"role":"assistant","content":[{{"type":"text","text":'
                f'{self._last_text}}}],"api":"openai-responses","provider":"openclaw",'
                f'"model":"delivery-mirror","usage":{{"input":0,"output":0,"cacheRead":0,'
                f'"cacheWrite":0,"totalTokens":0,"cost":{_ZERO_COST}}},"stopReason":"stop",'
                f'"timestamp":{self._ms}}}}}').encode()


class Synthetic:
    """A factory of synthetic sessions sharing one seeded word pool."""

    def __init__(self, seed: int = 7) -> None:
        self._words = _Words(seed)
        self._rng = random.Random(seed + 1)

    def session(self, session_id: str) -> SyntheticSession:
        return SyntheticSession(session_id, self._words, self._rng)

    def workload(self, sessions: int, length: int, seed: int = 3, prefix: str = "syn") -> list[
        Entry
    ]:
        """`sessions` sessions of `length` entries each (header included), interleaved."""
        ids = [f"{prefix}-{i}" for i in range(sessions)]
        lines = [list(itertools.islice(self.session(sid), length)) for sid in ids]
        return interleave(lines, ids, seed)

    def waves(self, sessions: int, length: int, wave: int) -> Iterator[list[Entry]]:
        """Many small sessions without holding them all: `wave` sessions at a time, each wave's
        entries interleaved turn by turn (entry 1 of every session, then entry 2, ...)."""
        for start in range(0, sessions, wave):
            ids = [f"small-{i}" for i in range(start, min(sessions, start + wave))]
            makers = [self.session(sid) for sid in ids]
            yield [(sid, maker.next()) for _ in range(length)
                   for sid, maker in zip(ids, makers, strict=True)]


def total_bytes(workload: Sequence[Entry]) -> int:
    return sum(len(raw) for _, raw in workload)
