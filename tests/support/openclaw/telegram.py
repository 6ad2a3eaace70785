"""A stand-in for the Telegram Bot API on loopback: OpenClaw's Telegram channel talks to it
(`channels.telegram.apiRoot`), so a DM can come in and the bot's answer, and the delivery
mirror OpenClaw writes for it, can be produced without a network.

Routes are `/bot<token>/<method>`. `getMe` names the bot; `getUpdates` serves the updates
queued by `dm()` (long polling: it waits for one up to the request's `timeout`); `sendMessage`
is recorded in `sent` and answered with a message; every other method (`deleteWebhook`,
`setMyCommands`, `sendChatAction`, ...) is answered `{"ok": true, "result": true}` and counted
in `calls`.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl

from tests.support.openclaw.loopback import LoopbackServer, serve

BOT_ID = 123456
BOT_TOKEN = f"{BOT_ID}:STANDINTOKEN"
LONG_POLL_CAP = 2.0  # seconds a getUpdates is held at most, so a stop never waits long


@dataclass
class TelegramStandIn:
    user_id: int = 777
    user_name: str = "Tester"
    sent: list[dict[str, Any]] = field(default_factory=list)
    calls: Counter = field(default_factory=Counter)
    _updates: list[dict[str, Any]] = field(default_factory=list)
    _condition: threading.Condition = field(default_factory=threading.Condition)
    _update_ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _message_ids: itertools.count = field(default_factory=lambda: itertools.count(9001))
    _server: LoopbackServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def dm(self, text: str) -> dict[str, Any]:
        """Queue a private message from the test user to the bot; returns the update."""
        with self._condition:
            update = {
                "update_id": next(self._update_ids),
                "message": {
                    "message_id": next(self._message_ids),
                    "date": int(time.time()),
                    "chat": {"id": self.user_id, "type": "private",
                             "first_name": self.user_name},
                    "from": {"id": self.user_id, "is_bot": False,
                             "first_name": self.user_name, "language_code": "en"},
                    "text": text,
                },
            }
            self._updates.append(update)
            self._condition.notify_all()
        return update

    def served(self) -> int:
        """How many getUpdates calls were answered (a sign the bot is polling)."""
        with self._condition:
            return self.calls["getUpdates"]

    def sent_texts(self) -> list[str]:
        with self._condition:
            return [str(message.get("text", "")) for message in self.sent]

    def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        wait = min(float(params.get("timeout") or 0), LONG_POLL_CAP)
        deadline = time.monotonic() + wait
        with self._condition:
            self.calls["getUpdates"] += 1
            while True:
                # Telegram forgets the updates below the offset once it is asked for it.
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
                if self._updates:
                    return list(self._updates)
                left = deadline - time.monotonic()
                if left <= 0 or self._server is None:
                    return []
                self._condition.wait(left)

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._condition:
            self.calls["sendMessage"] += 1
            self.sent.append(params)
            chat_id = params.get("chat_id")
            return {
                "message_id": next(self._message_ids),
                "date": int(time.time()),
                "chat": {"id": int(chat_id) if str(chat_id).lstrip("-").isdigit() else chat_id,
                         "type": "private", "first_name": self.user_name},
                "from": self._me(),
                "text": params.get("text", ""),
            }

    def _me(self) -> dict[str, Any]:
        return {"id": BOT_ID, "is_bot": True, "first_name": "Stand-in", "username": "standin_bot",
                "can_join_groups": False, "can_read_all_group_messages": False,
                "supports_inline_queries": False}

    def _answer(self, method: str, params: dict[str, Any]) -> Any:
        if method == "getUpdates":
            return self._get_updates(params)
        if method == "sendMessage":
            return self._send_message(params)
        with self._condition:
            self.calls[method] += 1
        if method == "getMe":
            return self._me()
        if method == "getWebhookInfo":
            return {"url": "", "has_custom_certificate": False, "pending_update_count": 0}
        return True

    def start(self) -> TelegramStandIn:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                path, _, query = self.path.partition("?")
                parts = path.strip("/").split("/")
                if len(parts) != 2 or not parts[0].startswith("bot"):
                    self._json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
                    return
                params: dict[str, Any] = dict(parse_qsl(query))
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else b""
                kind = self.headers.get("Content-Type", "")
                if data and "json" in kind:
                    params.update(json.loads(data))
                elif data and "urlencoded" in kind:
                    params.update(parse_qsl(data.decode()))
                self._json(200, {"ok": True, "result": stand_in._answer(parts[1], params)})

            do_GET = do_POST = _handle

            def _json(self, status: int, document: dict) -> None:
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = serve(Handler, "telegram-stand-in")
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            with self._condition:
                self._condition.notify_all()
            server.shutdown()
            server.server_close()
