// Transcript entries as OpenClaw's readers return them, and the messages OpenClaw 2026.9.6
// makes of them before assemble(): its merges of consecutive assistant and user messages
// (mergeConsecutiveAssistantTurns, mergeConsecutiveUserTurns in dist/embedded-agent-helpers-
// *.mjs), copied here as they are written there.

let clock = 1_796_465_000_000;
let ids = 0;

export const SIGNATURE = "c3RhbmQtaW4tc2lnbmF0dXJl";

export function entry(message, entryId = `e${++ids}`) {
  return { entryId, parentId: null, seq: ids, role: message.role, message };
}

export function user(text, extra = {}) {
  return entry({ role: "user", content: text, timestamp: ++clock, ...extra });
}

export function reply(text, { thinking = "Thinking it over.", usage = { input: 42, output: 12, totalTokens: 54 }, toolCalls = [], ...extra } = {}) {
  const content = [];
  if (thinking !== null) content.push({ type: "thinking", thinking, thinkingSignature: SIGNATURE });
  if (text !== null) content.push({ type: "text", text });
  for (const id of toolCalls) content.push({ type: "toolCall", id, name: "exec", arguments: { cmd: "ls" } });
  return entry({ role: "assistant", content, api: "anthropic-messages", provider: "standin", model: "stand-in-claude", usage, stopReason: toolCalls.length ? "toolUse" : "stop", timestamp: ++clock, ...extra });
}

export function copyOf(original, changes = {}) {
  const text = original.message.content.filter((b) => b.type === "text").map((b) => b.text).join("\n");
  return entry({ ...original.message, content: [{ type: "text", text }], timestamp: ++clock, ...changes });
}

export function toolResult(callId, text = "ok") {
  return entry({ role: "toolResult", toolCallId: callId, toolName: "exec", content: [{ type: "text", text }], isError: false, timestamp: ++clock });
}

// What OpenClaw sends assemble() for these entries: each entry's message (a copy, as its
// sanitizer makes), consecutive assistants and users merged.
export function openclawView(entries) {
  const out = [];
  for (const { message } of entries) {
    const last = out.at(-1);
    const copy = structuredClone(message);
    if (last && last.role === copy.role && copy.role === "assistant") {
      out[out.length - 1] = {
        ...last,
        content: [...last.content, ...copy.content],
        ...(copy.usage && { usage: copy.usage }),
        ...(copy.stopReason && { stopReason: copy.stopReason }),
        ...(copy.errorMessage && { errorMessage: copy.errorMessage }),
      };
    } else if (last && last.role === copy.role && copy.role === "user") {
      const blocks = (c) => (Array.isArray(c) ? c : typeof c === "string" ? [{ type: "text", text: c }] : []);
      out[out.length - 1] = { ...copy, content: [...blocks(last.content), ...blocks(copy.content)], timestamp: copy.timestamp ?? last.timestamp };
    } else {
      out.push(copy);
    }
  }
  return out;
}

export function textsOf(messages) {
  return messages.flatMap((m) => (typeof m.content === "string" ? [m.content] : m.content.filter((b) => b.type === "text").map((b) => b.text)));
}
