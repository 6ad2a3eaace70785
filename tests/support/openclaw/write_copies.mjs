// Writes copies into OpenClaw 2026.9.6 transcripts the way a buggy writer does, through
// OpenClaw's own transcript SDK (appendSessionTranscriptMessageByIdentity), so the rows are
// what OpenClaw itself stores. Each copy repeats the session's latest reply (or its latest user
// message):
//   cli-copy              api "cli", the reply's provider, model and usage, text only (2026.5.12's CLI copy)
//   mirror-real-provider  the reply's provider, model and api, text only, a usage of zeros, as a
//                         child of the reply (a cleaned copy of a raw reply)
//   echo                  the reply's provider, model, api and usage, text only, after the
//                         entries OpenClaw wrote behind the reply (a subagent echo)
//   keyed-replay          a keyed question delivered twice while its turn ran: the question, the
//                         same message again under its key by a writer that says it checked the
//                         key ("caller-checked"), then the reply to it
//   keyed-replay-trailing the latest question again under its key, as the session's last message
//   long                  a session of `turns` user/reply pairs, a cli copy after every tenth reply
//
//   node write_copies.mjs <openclaw package dir> '<JSON list of {session, shape, turns?}>'
// prints one JSON line per copy: {session, shape, entryId}. HOME must be the gateway's.
import path from "node:path";

const [packageDir, plan] = process.argv.slice(2);
const sdk = await import(path.join(packageDir, "dist/plugin-sdk/session-transcript-runtime.js"));
const zero = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
const textOf = (message) => message.content.filter((block) => block.type === "text").map((block) => block.text).join("\n");

async function append(scope, message, options = {}) {
  const result = await sdk.appendSessionTranscriptMessageByIdentity({ ...scope, message, ...options });
  if (!result?.appended) throw new Error(`${scope.sessionId}: OpenClaw did not write the copy: ${JSON.stringify(result)}`);
  return result.messageId;
}

for (const { session, shape, turns = 0 } of JSON.parse(plan)) {
  const scope = { agentId: "main", sessionId: session, sessionKey: `agent:main:explicit:${session}` };
  if (shape === "long") {
    for (let turn = 0; turn < turns; turn += 1) {
      await append(scope, { role: "user", content: `Long session question ${turn}: what about item ${turn}?`, timestamp: Date.now() });
      const reply = { role: "assistant", content: [{ type: "thinking", thinking: `Item ${turn}.`, thinkingSignature: "c3RhbmQtaW4tc2lnbmF0dXJl" }, { type: "text", text: `Item ${turn} is done; ${"details ".repeat(20)}` }], api: "anthropic-messages", provider: "standin", model: "stand-in-claude", usage: { ...zero, input: 42, output: 12, totalTokens: 54 }, stopReason: "stop", timestamp: Date.now() };
      await append(scope, reply);
      if (turn % 10 === 9) console.log(JSON.stringify({ session, shape: "cli-copy", entryId: await append(scope, { ...reply, content: [{ type: "text", text: textOf(reply) }], api: "cli", timestamp: Date.now() }) }));
    }
    continue;
  }
  const entries = await sdk.readVisibleSessionTranscriptMessageEntries(scope);
  const reply = entries.findLast((entry) => entry.role === "assistant");
  const question = entries.findLast((entry) => entry.role === "user");
  if (!reply || !question) throw new Error(`${session}: no reply or user message to copy`);
  const text = [{ type: "text", text: textOf(reply.message) }];
  const { provider, model, api, usage } = reply.message;
  const now = Date.now();
  let entryId;
  if (shape === "cli-copy") entryId = await append(scope, { role: "assistant", content: text, api: "cli", provider, model, usage, stopReason: "stop", timestamp: now });
  else if (shape === "mirror-real-provider") entryId = await append(scope, { role: "assistant", content: text, api, provider, model, usage: zero, stopReason: "stop", timestamp: now }, { parentId: reply.entryId });
  else if (shape === "echo") entryId = await append(scope, { role: "assistant", content: text, api, provider, model, usage, stopReason: "stop", timestamp: now });
  else if (shape === "keyed-replay-trailing") entryId = await append(scope, structuredClone(question.message), { idempotencyLookup: "caller-checked" });
  else if (shape === "keyed-replay") {
    const keyed = { role: "user", content: `A keyed question in ${session}: is the report sent?`, idempotencyKey: `${session}-run-2:user`, timestamp: now };
    const original = await append(scope, keyed);
    entryId = await append(scope, structuredClone(keyed), { idempotencyLookup: "caller-checked" });
    await append(scope, { ...reply.message, content: [{ type: "thinking", thinking: "Check the outbox.", thinkingSignature: "c3RhbmQtaW4tc2lnbmF0dXJl" }, { type: "text", text: `Yes, the report for ${session} is sent.` }], timestamp: now + 1 });
    console.log(JSON.stringify({ session, shape: "keyed-question", entryId: original }));
  }
  else throw new Error(`unknown shape ${shape}`);
  console.log(JSON.stringify({ session, shape, entryId }));
}
