"""A stand-in for the model: an Anthropic-messages (and OpenAI chat-completions) server on
loopback that streams scripted replies, so a real OpenClaw runs turns without a network.

OpenClaw's anthropic-messages provider POSTs `{baseUrl}/v1/messages` with `stream: true`; the
answer is the SSE sequence a real model streams: `message_start`, a thinking block
(`thinking_delta`, then `signature_delta`), a text block in a few `text_delta`s,
`message_delta` (`stop_reason: end_turn`, usage), `message_stop`. OpenClaw stores that as an
assistant entry with `[thinking (with its signature), text]`. The openai-completions provider
POSTs `{baseUrl}/chat/completions` (stream, `stream_options.include_usage`); it gets the text in
chunks and a usage chunk, no thinking.

What to answer: `ModelStandIn.reply_with(...)` queues replies, taken in order; with the queue
empty, `default_reply(prompt, n)` answers. The prompt is the last user text OpenClaw sent,
without the internal context block it appends (`<<<BEGIN_OPENCLAW_INTERNAL...`).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.openclaw.loopback import LoopbackServer, serve

INTERNAL_BLOCK = "<<<BEGIN_OPENCLAW_INTERNAL"
# OpenClaw puts the time in front of what the user wrote: "[Tue 2026-12-01 23:06 UTC] hello".
TIME_ENVELOPE = re.compile(r"^\[[A-Z][a-z]{2} \d{4}-\d\d-\d\d \d\d:\d\d[^\]]*\] ")
SIGNATURE = "c3RhbmQtaW4tc2lnbmF0dXJl"  # any base64 will do; OpenClaw keeps it as given


@dataclass(frozen=True)
class Reply:
    """One model answer: its visible text, its thinking (None: no thinking block)."""

    text: str
    thinking: str | None = "Thinking it over."
    chunks: int = 3  # the text arrives in this many text_delta events
    input_tokens: int = 42
    output_tokens: int = 12


def default_reply(prompt: str, number: int) -> Reply:
    """Names the request's number and the prompt's last line (a Telegram prompt starts with
    metadata blocks; its last line is what the user wrote)."""
    last = prompt.strip().splitlines()[-1] if prompt.strip() else ""
    return Reply(f"Reply {number}, to: {last}", thinking=f"Thinking about request {number}.")


@dataclass
class Request:
    """What OpenClaw sent: the path, the parsed body, and the prompt read from it."""

    path: str
    body: dict[str, Any]
    prompt: str
    reply: Reply


def prompt_of(body: dict[str, Any]) -> str:
    """The last user text of a request, OpenClaw's internal context block and the time in
    front of it left out."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [
            block.get("text", "") for block in content or []
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        texts = [t for t in texts if t.strip() and not t.lstrip().startswith(INTERNAL_BLOCK)]
        if texts:
            return TIME_ENVELOPE.sub("", texts[-1])
    return ""


def split_text(text: str, chunks: int) -> list[str]:
    """`text` in `chunks` consecutive non-empty pieces (fewer when it is shorter)."""
    size = max(1, -(-len(text) // max(1, chunks)))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def anthropic_events(reply: Reply, model: str) -> list[tuple[str, dict]]:
    """The SSE events of one streamed Anthropic-messages answer."""
    usage = {"input_tokens": reply.input_tokens, "output_tokens": 1,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    events: list[tuple[str, dict]] = [("message_start", {"type": "message_start", "message": {
        "id": f"msg_{uuid.uuid4().hex[:16]}", "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": usage}})]
    index = 0
    if reply.thinking is not None:
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index,
                                     "content_block": {"type": "thinking", "thinking": "",
                                                       "signature": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": index,
                                     "delta": {"type": "thinking_delta",
                                               "thinking": reply.thinking}}),
            ("content_block_delta", {"type": "content_block_delta", "index": index,
                                     "delta": {"type": "signature_delta",
                                               "signature": SIGNATURE}}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
        index += 1
    events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                           "content_block": {"type": "text", "text": ""}}))
    events += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                        "delta": {"type": "text_delta", "text": piece}})
               for piece in split_text(reply.text, reply.chunks)]
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": reply.output_tokens}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def completion_chunks(reply: Reply, model: str) -> list[dict]:
    """The chunks of one streamed OpenAI chat completion, the usage chunk last."""
    base = {"id": f"chatcmpl-{uuid.uuid4().hex[:16]}", "object": "chat.completion.chunk",
            "created": 0, "model": model}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                    "finish_reason": None}]}]
    chunks += [{**base, "choices": [{"index": 0, "delta": {"content": piece},
                                     "finish_reason": None}]}
               for piece in split_text(reply.text, reply.chunks)]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    chunks.append({**base, "choices": [], "usage": {
        "prompt_tokens": reply.input_tokens, "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens}})
    return chunks


@dataclass
class ModelStandIn:
    """The server; `start()` binds a free loopback port, `stop()` closes it."""

    answer: Callable[[str, int], Reply] = default_reply
    requests: list[Request] = field(default_factory=list)
    _queued: deque[Reply] = field(default_factory=deque)
    _server: LoopbackServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _numbers: itertools.count = field(default_factory=lambda: itertools.count(1))

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reply_with(self, *replies: Reply | str) -> None:
        """Queue the next answers, in order (a string is a Reply with default thinking)."""
        with self._lock:
            self._queued.extend(Reply(r) if isinstance(r, str) else r for r in replies)

    def replies(self) -> list[Reply]:
        """What was answered so far, in order."""
        with self._lock:
            return [request.reply for request in self.requests]

    def _next(self, path: str, body: dict) -> Reply:
        prompt = prompt_of(body)
        with self._lock:
            number = next(self._numbers)
            reply = self._queued.popleft() if self._queued else self.answer(prompt, number)
            self.requests.append(Request(path, body, prompt, reply))
        return reply

    def start(self) -> ModelStandIn:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?", 1)[0]
                if path.endswith("/messages"):
                    self._stream_anthropic(path, body)
                elif path.endswith("/chat/completions"):
                    self._stream_completion(path, body)
                else:
                    self._json(404, {"error": {"type": "not_found", "message": path}})

            def do_GET(self) -> None:
                self._json(404, {"error": {"type": "not_found", "message": self.path}})

            def _json(self, status: int, document: dict) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse_start(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

            def _stream_anthropic(self, path: str, body: dict) -> None:
                reply = stand_in._next(path, body)
                self._sse_start()
                for name, data in anthropic_events(reply, body.get("model", "stand-in")):
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()

            def _stream_completion(self, path: str, body: dict) -> None:
                reply = stand_in._next(path, body)
                self._sse_start()
                for chunk in completion_chunks(reply, body.get("model", "stand-in")):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

        self._server = serve(Handler, "model-stand-in")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
