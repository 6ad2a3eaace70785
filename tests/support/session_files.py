"""Lines of OpenClaw files that are not transcripts: runtime traces, pointers, Telegram state."""

from __future__ import annotations

# The first line of a real OpenClaw 2026.5.12 runtime trace (paths shortened).
TRACE_LINE = (
    b'{"traceSchema":"openclaw-trajectory","schemaVersion":1,"traceId":"sx-1","source":"runtime",'
    b'"type":"session.started","ts":"2026-12-01T23:09:02.471Z","seq":1,"sourceSeq":1,'
    b'"sessionId":"sx-1","sessionKey":"agent:main:explicit:sx-1","runId":"ccf7e116",'
    b'"provider":"standin","modelId":"stand-in-claude","modelApi":"anthropic-messages",'
    b'"data":{"trigger":"user","agentId":"main","toolCount":25}}'
)


POINTER = (
    b'{"traceSchema":"openclaw-trajectory-pointer","schemaVersion":1,"sessionId":"sx-1",'
    b'"runtimeFile":"/state/agents/main/sessions/sx-1.trajectory.jsonl"}'
)


TELEGRAM_MESSAGES = b'{"key":"default:777:9001","node":{"sourceMessage":{"message_id":9001}}}'
