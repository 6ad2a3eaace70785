"""The harness's own pieces, without OpenClaw: the install check, the stand-ins' wire format."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.support.openclaw.gateway import RELEASES
from tests.support.openclaw.install import OpenClawMissing, locate, pinned_releases
from tests.support.openclaw.model import ModelStandIn, Reply, prompt_of
from tests.support.openclaw.telegram import BOT_TOKEN, TelegramStandIn


def test_every_pinned_release_is_described() -> None:
    assert sorted(pinned_releases()) == sorted(RELEASES)


def test_a_missing_install_says_how_to_make_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SESSION_STREAM_CACHE", str(tmp_path))
    with pytest.raises(OpenClawMissing, match=r"run `make openclaw`"):
        locate("2026.9.6")


def test_the_prompt_is_the_last_user_text_without_the_internal_block_and_the_time() -> None:
    body = {"messages": [
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {"role": "user", "content": [
            {"type": "text", "text": "[Tue 2026-12-01 23:06 UTC] first turn"},
            {"type": "text", "text": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> ... <<<END>>>"},
        ]},
    ]}
    assert prompt_of(body) == "first turn"


def post(url: str, body: dict) -> bytes:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.read()


def test_the_model_streams_thinking_signature_then_text_in_pieces() -> None:
    model = ModelStandIn().start()
    try:
        model.reply_with(Reply("one two three", thinking="hmm", chunks=3))
        stream = post(f"{model.url}/v1/messages", {
            "model": "m", "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}).decode()
    finally:
        model.stop()
    events = [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: ")]
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert [e["type"] for e in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "content_block_start", *["content_block_delta"] * 3,
        "content_block_stop", "message_delta", "message_stop"]
    assert [d["type"] for d in deltas[:2]] == ["thinking_delta", "signature_delta"]
    assert "".join(d["text"] for d in deltas[2:]) == "one two three"
    assert events[-2]["delta"]["stop_reason"] == "end_turn"
    assert [r.prompt for r in model.requests] == ["hi"]


def test_telegram_serves_a_queued_dm_and_records_what_the_bot_sends() -> None:
    telegram = TelegramStandIn().start()
    base = f"{telegram.url}/bot{BOT_TOKEN}"
    try:
        update = telegram.dm("hello")
        served = json.loads(post(f"{base}/getUpdates", {"offset": 0, "timeout": 0}))
        after = json.loads(post(f"{base}/getUpdates", {"offset": update["update_id"] + 1}))
        sent = json.loads(post(f"{base}/sendMessage", {"chat_id": 777, "text": "hi there"}))
        other = json.loads(post(f"{base}/setMyCommands", {"commands": []}))
    finally:
        telegram.stop()
    assert served == {"ok": True, "result": [update]}
    assert after == {"ok": True, "result": []}
    assert sent["ok"] and sent["result"]["text"] == "hi there"
    assert telegram.sent_texts() == ["hi there"]
    assert other == {"ok": True, "result": True}
