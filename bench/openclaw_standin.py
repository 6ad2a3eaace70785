"""`python -m bench.openclaw_standin`: what OpenClaw does for the source latency benchmark, at a
rate a real gateway cannot reach here (its turns take seconds): commit transcript rows into a
store in OpenClaw's schema and, after each commit, emit the matching `session.message` to the
Gateway WebSocket clients, as OpenClaw does (frames shaped from the real capture in
tests/data/openclaw-live: the challenge, hello-ok, session.message with its session row).

Every third row of a session is a custom row (`openclaw.cache-ttl`, as OpenClaw writes one
after a reply) committed with no event, as OpenClaw does: only the store's own change signal
can bring it through without waiting for a poll.

It first writes each session's header and waits for a `go` file (the bench creates it once the
pipeline has carried those through), then commits `--rate` rows a second, spread evenly over
`--sessions` sessions, for `--seconds`, appending `entry id, commit time (ns)` to `--log` after
each commit (and `\tcustom` for a row with no event), then writes a `done` line and serves
until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import sqlite3
import time
from pathlib import Path

import orjson
from websockets.asyncio.server import ServerConnection, serve

CAPTURE = Path(__file__).resolve().parents[1] / "tests/data/openclaw-live/ws-capture-3-turns.jsonl"
SCHEMA = """
CREATE TABLE IF NOT EXISTS session_windows (
    session_id TEXT NOT NULL PRIMARY KEY, session_key TEXT NOT NULL, previous_session_id TEXT,
    reason TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL) STRICT;
CREATE TABLE IF NOT EXISTS transcript_events (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_json TEXT, created_at INTEGER NOT NULL,
    event_zstd BLOB, event_utf8_bytes INTEGER, navigation_json TEXT,
    PRIMARY KEY (session_id, seq)) STRICT;
CREATE TABLE IF NOT EXISTS transcript_rewrite_watermarks (
    session_id TEXT NOT NULL PRIMARY KEY, generation TEXT NOT NULL,
    updated_at INTEGER NOT NULL) STRICT;
"""
INSERT = ("INSERT INTO transcript_events (session_id, seq, event_json, created_at) "
          "VALUES (?, ?, ?, ?)")


def frames() -> tuple[dict, dict, dict]:
    captured = [orjson.loads(line)["frame"] for line in CAPTURE.open("rb")]
    message = next(f for f in captured if f.get("event") == "session.message")
    return captured[0], captured[2]["payload"], message


class Clients:
    def __init__(self) -> None:
        self.challenge, self.hello, self.message = frames()
        self.sockets: set[ServerConnection] = set()

    async def handle(self, socket: ServerConnection) -> None:
        await socket.send(orjson.dumps(self.challenge).decode())
        connect = orjson.loads(await socket.recv())
        await socket.send(orjson.dumps(
            {"type": "res", "id": connect["id"], "ok": True, "payload": self.hello}).decode())
        async for text in socket:
            request = orjson.loads(text)
            await socket.send(orjson.dumps(
                {"type": "res", "id": request["id"], "ok": True,
                 "payload": {"subscribed": True}}).decode())
            self.sockets.add(socket)
        self.sockets.discard(socket)

    async def emit(self, session_id: str, seq: int, entry: dict) -> None:
        if not self.sockets:
            return
        frame = copy.deepcopy(self.message)
        payload = frame["payload"]
        payload.update(sessionId=session_id, sessionKey=f"agent:main:explicit:{session_id}",
                       messageId=entry["id"], messageSeq=seq)
        payload["message"] = {**entry["message"], "__openclaw": {
            "id": entry["id"], "seq": seq, "transcriptPosition": {"rawSeq": seq}}}
        text = orjson.dumps(frame).decode()
        for socket in list(self.sockets):
            try:
                await socket.send(text)
            except Exception:  # noqa: BLE001 - a client gone; the others still get it
                self.sockets.discard(socket)


def entry(session_id: str, number: int, parent: str | None) -> dict:
    """The session's row `number`: a user line, the reply, then the reply's custom row."""
    if number % 3 == 0:
        return {"type": "custom", "customType": "openclaw.cache-ttl",
                "data": {"timestamp": 1772968929932 + number, "provider": "anthropic",
                         "modelId": "claude-opus-4-5"},
                "id": f"{session_id}-{number}", "parentId": parent,
                "timestamp": "2026-12-01T00:00:00.000Z"}
    role = "user" if number % 3 == 1 else "assistant"
    text = f"{role} line {number} of {session_id}: " + "lorem ipsum dolor sit amet " * 6
    content = text if role == "user" else [{"type": "text", "text": text}]
    return {"type": "message", "id": f"{session_id}-{number}", "parentId": parent,
            "timestamp": "2026-12-01T00:00:00.000Z", "message": {"role": role, "content": content}}


async def main(args: argparse.Namespace) -> None:
    clients = Clients()
    db = sqlite3.connect(args.store, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(SCHEMA)
    sessions = [f"bench-{n:03d}" for n in range(args.sessions)]
    with Path(args.log).open("a", buffering=1) as log:
        async with serve(clients.handle, "127.0.0.1", args.port, compression=None):
            for session_id in sessions:
                header = {"type": "session", "version": 4, "id": session_id,
                          "timestamp": "2026-12-01T00:00:00.000Z", "cwd": "/bench"}
                db.execute("INSERT INTO session_windows VALUES (?, ?, NULL, NULL, 0, 0)",
                           (session_id, f"agent:main:explicit:{session_id}"))
                db.execute("INSERT INTO transcript_rewrite_watermarks VALUES (?, ?, 0)",
                           (session_id, f"g-{session_id}"))
                db.execute(INSERT, (session_id, 0, orjson.dumps(header).decode(), 0))
                log.write(f"{session_id}\t{time.time_ns()}\n")
            while not Path(args.go).exists():
                await asyncio.sleep(0.05)
            parents: dict[str, str | None] = dict.fromkeys(sessions)
            interval = 1 / args.rate
            start = time.monotonic()
            for number in range(int(args.rate * args.seconds)):
                # Paced against the start, so a slow commit does not lower the rate.
                await asyncio.sleep(max(0.0, start + number * interval - time.monotonic()))
                session_id = sessions[number % len(sessions)]
                seq = number // len(sessions) + 1
                body = entry(session_id, seq, parents[session_id])
                parents[session_id] = body["id"]
                created = int(time.time() * 1000)
                db.execute(INSERT, (session_id, seq, orjson.dumps(body).decode(), created))
                if body["type"] == "custom":
                    log.write(f"{body['id']}\t{time.time_ns()}\tcustom\n")
                else:
                    log.write(f"{body['id']}\t{time.time_ns()}\n")
                    await clients.emit(session_id, seq, body)
            log.write("done\n")
            await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--go", required=True)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    asyncio.run(main(parser.parse_args()))
