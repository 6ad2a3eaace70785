// What the engine adds to a turn: assemble() timed in a process of its own, with OpenClaw's real
// transcript readers over a real store and the real verdict service, as many times as asked.
//
//   HOME=<gateway home> node bench/assemble.mjs <openclaw package dir> '<plugin config JSON>' \
//       '<JSON list of session ids>' <rounds>
//
// Each session's messages are what OpenClaw makes of its entries (test/transcript.mjs's
// openclawView: mirrors out, consecutive messages merged; a trailing question left out). The
// first assemble of a session reads its whole transcript (cold); the next ones read what was
// appended since (warm: nothing here).
// Prints one JSON object: per session its entries, the blocks of its messages and of what was
// sent, and the cold time; and the warm percentiles.
import { registerHooks } from "node:module";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";

import { openclawView } from "../test/transcript.mjs";

const [packageDir, config, sessions, rounds] = process.argv.slice(2);
registerHooks({
  resolve: (specifier, context, next) => {
    const sdk = specifier.match(/^openclaw\/plugin-sdk\/(.+)$/);
    return sdk ? { url: pathToFileURL(path.join(packageDir, "dist", "plugin-sdk", `${sdk[1]}.js`)).href, shortCircuit: true } : next(specifier, context);
  },
});
const { default: entry } = await import("../dist/index.js");
const sdk = await import("openclaw/plugin-sdk/session-transcript-runtime");

let factory;
const lines = [];
entry.register({
  id: "session-stream", name: "session-stream", registrationMode: "full", pluginConfig: JSON.parse(config),
  logger: { info: (line) => lines.push(line), warn: (line) => lines.push(line), error: (line) => lines.push(line) },
  runtime: { state: { resolveStateDir: () => path.join(process.env.HOME, ".openclaw") } },
  registerContextEngine: (_, made) => { factory = made; },
});

const blocks = (messages) => messages.reduce((n, m) => n + (Array.isArray(m.content) ? m.content.length : 1), 0);
const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
const report = { sessions: {}, warm: [] };
const inputs = [];
for (const sessionId of JSON.parse(sessions)) {
  const scope = { agentId: "main", sessionId, sessionKey: `agent:main:explicit:${sessionId}` };
  const entries = await sdk.readVisibleSessionTranscriptMessageEntries(scope);
  const messages = openclawView(entries.filter(({ message }) => !(message.provider === "openclaw" && message.model === "delivery-mirror")));
  // An unanswered user message last is the turn's pending input to OpenClaw (its orphan repair
  // folds it into the prompt), not history.
  if (messages.at(-1)?.role === "user") messages.pop();
  inputs.push({ ...scope, messages });
  const engine = await factory({});
  const started = performance.now();
  const result = await engine.assemble({ ...scope, messages, availableTools: new Set() });
  const coldMs = performance.now() - started;
  report.sessions[sessionId] = { entries: entries.length, blocks: blocks(messages), sent: blocks(result.messages), coldMs };
}
for (let round = 0; round < Number(rounds); round += 1) {
  for (const input of inputs) {
    const engine = await factory({});
    const started = performance.now();
    await engine.assemble({ ...input, availableTools: new Set() });
    report.warm.push(performance.now() - started);
  }
}
const warm = report.warm.toSorted((a, b) => a - b);
report.warm = { n: warm.length, p50Ms: percentile(warm, 50), p99Ms: percentile(warm, 99), maxMs: warm.at(-1) };
report.logLines = lines.length;
report.unchangedLines = lines.filter((line) => line.includes("messages unchanged")).slice(0, 5);
console.log(JSON.stringify(report));
process.exit(0);
