// The engine as OpenClaw drives it, against a verdict service on loopback: what assemble()
// returns, what it logs, how long it takes, and that nothing it does throws.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";

import { settingsFrom } from "../dist/config.js";
import { createEngine } from "../dist/engine.js";
import { Ledger } from "../dist/ledger.js";
import { VerdictClient } from "../dist/verdicts.js";
import { copyOf, openclawView, reply, textsOf, user } from "./transcript.mjs";

const TOKEN = "the-token";
const folder = mkdtempSync(path.join(os.tmpdir(), "session-stream-engine-"));
const tokenFile = path.join(folder, "verdicts.token");
writeFileSync(tokenFile, `${TOKEN}\n`);

// The service: answers per session what `answers` holds, after `delayMs`.
const answers = new Map();
const asked = [];
let delayMs = 0;
const service = http.createServer((request, response) => {
  const url = new URL(request.url, "http://127.0.0.1");
  asked.push(url.searchParams);
  if (request.headers.authorization !== `Bearer ${TOKEN}`) {
    response.writeHead(401).end("{}");
    return;
  }
  const answer = answers.get(url.searchParams.get("session")) ?? { processed: false, dropped: {}, reason: "no entry of the session processed yet" };
  setTimeout(() => response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer)), delayMs);
});
let serviceUrl;

before(async () => {
  await new Promise((resolve) => service.listen(0, "127.0.0.1", resolve));
  serviceUrl = `http://127.0.0.1:${service.address().port}`;
});
after(() => {
  service.closeAllConnections();
  service.close();
  rmSync(folder, { recursive: true, force: true });
});

// A transcript the engine reads, per session id.
const transcripts = new Map();

function engineWith(overrides = {}) {
  const lines = [];
  const logger = { info: (line) => lines.push(["info", line]), warn: (line) => lines.push(["warn", line]), error: (line) => lines.push(["error", line]) };
  // A deadline no busy machine misses, but in the test of the deadline.
  const settings = { ...settingsFrom({ tokenFile, stateDir: path.join(folder, "state"), traceFile: path.join(folder, "trace.jsonl"), deadlineMs: 5000 }, folder), serviceUrl, ...overrides.settings };
  const verdicts = new VerdictClient(settings.serviceUrl, settings.tokenFile);
  const host = {
    settings,
    logger: overrides.logger ?? logger,
    transcripts: overrides.transcripts ?? { visible: async ({ sessionId }) => transcripts.get(sessionId) ?? [] },
    verdicts,
    ledger: overrides.ledger ?? new Ledger(settings.stateDir),
    delegateCompaction: overrides.delegateCompaction ?? (async () => ({ ok: true, compacted: false, reason: "nothing to do" })),
    memoryPrompt: overrides.memoryPrompt ?? (() => "## Memory\nSearch memory before answering."),
  };
  return { engine: createEngine(host), lines, close: () => verdicts.close() };
}

function sessionWithCliCopy(sessionId) {
  const question = user("What changed?");
  const answer = reply("Two files.", { thinking: "Look at the diff." });
  const cli = copyOf(answer, { api: "cli" });
  const entries = [question, answer, cli];
  transcripts.set(sessionId, entries);
  return { entries, cli, answer, messages: openclawView(entries) };
}

test("the engine declares OpenClaw's transcript semantics, a commitTurn and delegated compaction", () => {
  const { engine, close } = engineWith();
  close();
  assert.deepEqual(engine.info.transcriptSemantics, { currentTurnFence: "before-current-turn-entry-v1", turnAdvancementIdempotency: "atomic-idempotent-v1" });
  assert.equal(engine.info.ownsCompaction, false);
  assert.equal(typeof engine.commitTurn, "function");
});

test("assemble leaves out the copies the service names and logs them in one line", async () => {
  const { cli, answer, messages } = sessionWithCliCopy("s-removed");
  answers.set("s-removed", { processed: true, dropped: { [cli.entryId]: answer.entryId }, reason: null });
  const { engine, lines, close } = engineWith();
  const result = await engine.assemble({ sessionId: "s-removed", sessionKey: "agent:main:explicit:s-removed", messages, availableTools: new Set(["memory_search"]) });
  close();
  assert.deepEqual(textsOf(result.messages), ["What changed?", "Two files."]);
  assert.equal(result.systemPromptAddition, "## Memory\nSearch memory before answering.");
  assert.deepEqual(lines, [["info", `[session-stream] session s-removed: left out 1 copy: ${cli.entryId} (repeats ${answer.entryId})`]]);
  assert.equal(asked.at(-1).get("through"), cli.entryId);
});

test("verdicts that lag the transcript leave the messages unchanged, with one log line", async () => {
  const { messages, cli } = sessionWithCliCopy("s-lag");
  answers.set("s-lag", { processed: false, dropped: {}, reason: `entry ${cli.entryId} not processed yet` });
  const { engine, lines, close } = engineWith();
  const result = await engine.assemble({ sessionId: "s-lag", messages });
  close();
  assert.equal(result.messages, messages);
  assert.deepEqual(lines, [["info", `[session-stream] session s-lag: messages unchanged: verdicts lag the transcript (entry ${cli.entryId} not processed yet)`]]);
});

test("a service slower than the deadline holds the turn up by the deadline only", async () => {
  const { messages, cli, answer } = sessionWithCliCopy("s-slow");
  answers.set("s-slow", { processed: true, dropped: { [cli.entryId]: answer.entryId }, reason: null });
  delayMs = 3000;
  const { engine, lines, close } = engineWith({ settings: { deadlineMs: 50 } });
  const started = performance.now();
  const result = await engine.assemble({ sessionId: "s-slow", messages });
  const took = performance.now() - started;
  delayMs = 0;
  close();
  assert.equal(result.messages, messages);
  assert.ok(took < 1500, `assemble took ${took} ms with a 50 ms deadline and a 3 s service`);
  assert.deepEqual(lines, [["warn", "[session-stream] session s-slow: messages unchanged: no verdicts within 50 ms"]]);
});

test("a service that is not there, or refuses the token, leaves the messages unchanged", async () => {
  const { messages } = sessionWithCliCopy("s-down");
  const closed = http.createServer();
  await new Promise((resolve) => closed.listen(0, "127.0.0.1", resolve));
  const port = closed.address().port;
  closed.close();
  const down = engineWith({ settings: { serviceUrl: `http://127.0.0.1:${port}` } });
  const result = await down.engine.assemble({ sessionId: "s-down", messages });
  down.close();
  assert.equal(result.messages, messages);
  assert.equal(down.lines.length, 1);
  assert.match(down.lines[0][1], /^\[session-stream\] session s-down: messages unchanged: Error: connect ECONNREFUSED/);

  const wrongToken = path.join(folder, "wrong.token");
  writeFileSync(wrongToken, "not-the-token");
  const refused = engineWith({ settings: { tokenFile: wrongToken } });
  const again = await refused.engine.assemble({ sessionId: "s-down", messages });
  refused.close();
  assert.equal(again.messages, messages);
  assert.deepEqual(refused.lines, [["warn", "[session-stream] session s-down: messages unchanged: Error: the verdict service answered 401"]]);
});

test("nothing the engine meets makes it throw", async () => {
  const { messages } = sessionWithCliCopy("s-broken");
  const failing = engineWith({
    transcripts: { visible: async () => { throw new Error("store locked"); } },
    logger: { info() { throw new Error("log full"); }, warn() { throw new Error("log full"); }, error() {} },
    memoryPrompt: () => { throw new Error("prepared memory prompt section does not match the current run"); },
    delegateCompaction: async () => { throw new Error("compaction crashed"); },
    ledger: { commit: async () => { throw new Error("disk full"); }, predecessors: async () => [], follow: async () => {} },
  });
  const result = await failing.engine.assemble({ sessionId: "s-broken", messages });
  assert.equal(result.messages, messages);
  assert.equal(result.systemPromptAddition, undefined);
  const compacted = await failing.engine.compact({ sessionId: "s-broken", sessionKey: "agent:main:explicit:s-broken", force: true });
  assert.deepEqual([compacted.ok, compacted.compacted], [false, false]);
  const committed = await failing.engine.commitTurn(turn("k-broken"));
  assert.notEqual(committed.status, "committed"); // OpenClaw keeps the turn and offers it again
  assert.notEqual(committed.status, "duplicate");
  failing.close();
});

function turn(advancementKey, sessionId = "s-turns") {
  const anchor = (entryId) => ({ agentId: "main", sessionId, sessionKey: `agent:main:explicit:${sessionId}`, storePath: "/store", generation: "g", entryId, rawSeq: 1, effectiveParentId: null, activeMessagePosition: 0 });
  return { advancementKey, sessionId, sessionKey: `agent:main:explicit:${sessionId}`, admission: { ...anchor("u1"), logicalTurnId: advancementKey, role: "user" }, terminal: anchor("a1"), messages: [] };
}

test("commitTurn is atomic and idempotent per advancement key, across engines and processes", async () => {
  const stateDir = path.join(folder, "ledger");
  const first = engineWith({ settings: { stateDir }, ledger: new Ledger(stateDir) });
  const second = engineWith({ settings: { stateDir }, ledger: new Ledger(stateDir) }); // another process's
  const statuses = await Promise.all([
    first.engine.commitTurn(turn("k1")), second.engine.commitTurn(turn("k1")), first.engine.commitTurn(turn("k1")),
    second.engine.commitTurn(turn("k2")),
  ]);
  const later = await engineWith({ ledger: new Ledger(stateDir) }).engine.commitTurn(turn("k1"));
  first.close();
  second.close();
  assert.deepEqual(statuses.map((s) => s.status).toSorted(), ["committed", "committed", "duplicate", "duplicate"]);
  assert.equal(later.status, "duplicate");
  const files = readdirSync(path.join(stateDir, "turns"));
  assert.equal(files.length, 2); // one per key, no temporary file left
  const records = files.map((name) => JSON.parse(readFileSync(path.join(stateDir, "turns", name), "utf8")));
  assert.deepEqual(records.map((r) => [r.advancementKey, r.admissionEntryId, r.terminalEntryId]).toSorted(), [["k1", "u1", "a1"], ["k2", "u1", "a1"]]);
});

test("a commit that cannot be written is not answered committed", async () => {
  const stateDir = path.join(folder, "not-a-folder");
  writeFileSync(stateDir, "a file where the state folder should be");
  const { engine, lines, close } = engineWith({ ledger: new Ledger(stateDir) });
  const answer = await engine.commitTurn(turn("k-unwritable"));
  close();
  assert.ok(!["committed", "duplicate"].includes(answer.status));
  assert.match(lines[0][1], /turn k-unwritable not committed, OpenClaw retries it: Error: ENOTDIR/);
});

test("a compaction that moves the session to a successor id is followed", async () => {
  const stateDir = path.join(folder, "successors");
  const { cli, answer } = sessionWithCliCopy("s-before");
  const question = user("After the compaction?");
  transcripts.set("s-after", [question]);
  answers.set("s-after", { processed: true, dropped: { [cli.entryId]: answer.entryId }, reason: null });
  const delegated = [];
  const { engine, close } = engineWith({
    settings: { stateDir },
    ledger: new Ledger(stateDir),
    delegateCompaction: async (params) => {
      delegated.push(params);
      return { ok: true, compacted: true, result: { tokensBefore: 900, sessionTarget: { agentId: "main", sessionId: "s-after", sessionKey: params.sessionKey } } };
    },
  });
  const result = await engine.compact({ sessionId: "s-before", sessionKey: "agent:main:explicit:s-before", force: true });
  await engine.assemble({ sessionId: "s-after", sessionKey: "agent:main:explicit:s-before", messages: [question.message] });
  close();
  assert.equal(result.result.sessionTarget.sessionId, "s-after");
  assert.equal(delegated[0].force, true);
  assert.deepEqual(asked.at(-1).getAll("predecessor"), ["s-before"]);
});

test("warming up opens the connection with a health request", async () => {
  const before = asked.length;
  const verdicts = new VerdictClient(serviceUrl, tokenFile);
  verdicts.warm();
  for (let wait = 0; wait < 100 && asked.length === before; wait += 1) await new Promise((resolve) => setTimeout(resolve, 10));
  verdicts.close();
  assert.equal(asked.length, before + 1);
});

test("without transcript entries before the turn nothing is asked", async () => {
  const before = asked.length;
  const { engine, lines, close } = engineWith();
  const result = await engine.assemble({ sessionId: "s-new", messages: [] });
  close();
  assert.deepEqual(result.messages, []);
  assert.equal(asked.length, before);
  assert.deepEqual(lines, []);
});

test("each assemble is traced without message text", async () => {
  const trace = readFileSync(path.join(folder, "trace.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line));
  const removed = trace.find((t) => t.sessionId === "s-removed");
  assert.deepEqual([removed.outcome, removed.messages, removed.sent], ["removed", 2, 2]);
  assert.equal(typeof removed.elapsedMs, "number");
  assert.ok(!JSON.stringify(trace).includes("Two files."));
});
