// Which of OpenClaw's messages leave, and what stays of a merged one.
import assert from "node:assert/strict";
import { test } from "node:test";

import { removeCopies } from "../dist/removal.js";
import { copyOf, entry, openclawView, reply, textsOf, toolResult, user } from "./transcript.mjs";

const dropped = (...pairs) => new Map(pairs.map(([copy, original]) => [copy.entryId, original.entryId]));

test("a keyed replay of the question is removed whole, every other message is the same object", () => {
  const question = user("What is on the list today?", { idempotencyKey: "run-1:user" });
  const answer = reply("Two meetings and a review.");
  const replay = user("What is on the list today?", { idempotencyKey: "run-1:user" });
  const messages = openclawView([question, answer, replay]);
  const result = removeCopies(messages, [question, answer, replay], dropped([replay, question]));
  assert.deepEqual(result.messages, messages.slice(0, 2));
  assert.equal(result.messages[0], messages[0]);
  assert.equal(result.messages[1], messages[1]);
  assert.deepEqual(result.removed, [{ entryId: replay.entryId, repeats: question.entryId }]);
});

test("a copy merged into its reply leaves with its blocks, the reply's stay byte for byte", () => {
  const question = user("Status?");
  const answer = reply("All green.", { thinking: "Check the pipeline first." });
  const cli = copyOf(answer, { api: "cli", usage: { input: 1, output: 1, totalTokens: 2 }, stopReason: "stop" });
  const messages = openclawView([question, answer, cli]);
  assert.deepEqual(textsOf(messages), ["Status?", "All green.", "All green."]);

  const result = removeCopies(messages, [question, answer, cli], dropped([cli, answer]));

  const sent = result.messages.at(-1);
  assert.deepEqual(textsOf(result.messages), ["Status?", "All green."]);
  assert.equal(sent.content[0], messages[1].content[0]); // the very block OpenClaw made
  assert.equal(JSON.stringify(sent.content), JSON.stringify(answer.message.content));
  assert.deepEqual([sent.usage, sent.stopReason, sent.api], [answer.message.usage, "stop", "anthropic-messages"]);
  assert.equal(result.messages[0], messages[0]);
});

test("the thinking blocks of the latest kept assistant message reach the model unmodified", () => {
  const first = [user("one"), reply("Reply 1.", { thinking: "First thought." })];
  const answer = reply("Reply 2.", { thinking: "Second thought, with a signature." });
  const echo = copyOf(answer, { usage: answer.message.usage });
  const entries = [...first, user("two"), answer, echo];
  const result = removeCopies(openclawView(entries), entries, dropped([echo, answer]));
  const latest = result.messages.findLast((m) => m.role === "assistant");
  const thinking = (content) => JSON.stringify(content.filter((b) => b.type === "thinking"));
  assert.equal(thinking(latest.content), thinking(answer.message.content));
  assert.equal(latest.content.at(-1).text, "Reply 2.");
  assert.equal(latest.content.length, 2);
});

test("a copy merged behind an entry OpenClaw's sanitizer dropped is still found", () => {
  const answer = reply("Done.");
  const mirror = copyOf(answer, { provider: "openclaw", model: "delivery-mirror" }); // not in the view
  const cli = copyOf(answer, { api: "cli" });
  const entries = [user("go"), answer, mirror, cli];
  const view = openclawView([entries[0], answer, cli]);
  const result = removeCopies(view, entries, dropped([mirror, answer], [cli, answer]));
  assert.deepEqual(textsOf(result.messages), ["go", "Done."]);
  assert.deepEqual(result.removed.map((r) => r.entryId), [cli.entryId]);
});

test("blocks that could be a kept entry's or a copy's are taken for the kept entry's", () => {
  const answer = reply("Sent.");
  const mirror = copyOf(answer, { provider: "openclaw", model: "delivery-mirror" }); // dropped, not in the view
  const second = copyOf(answer, { api: "cli", idempotencyKey: "send-2" }); // kept by session-stream
  const entries = [user("send it"), answer, mirror, second];
  const view = openclawView([entries[0], answer, second]);
  const result = removeCopies(view, entries, dropped([mirror, answer]));
  assert.equal(result.messages, view);
});

test("a reply OpenClaw sends without its thinking (another provider) still sheds its copy", () => {
  const answer = reply("Both days: meetings.", { thinking: "Combine them." });
  const cli = copyOf(answer, { api: "cli" });
  const entries = [user("both?"), answer, cli];
  const view = openclawView(entries);
  view[1] = { ...view[1], content: view[1].content.filter((b) => b.type !== "thinking") };
  const result = removeCopies(view, entries, dropped([cli, answer]));
  assert.deepEqual(result.messages[1].content, [{ type: "text", text: "Both days: meetings." }]);
});

test("nothing that session-stream did not drop is removed, whatever else it dropped", () => {
  const entries = [user("a"), reply("A."), user("b"), reply("B."), toolResult("x")];
  const messages = openclawView(entries);
  const elsewhere = entry({ role: "assistant", content: [{ type: "text", text: "A." }], timestamp: 1 });
  const result = removeCopies(messages, entries, dropped([elsewhere, entries[1]]));
  assert.equal(result.messages, messages);
  assert.deepEqual(result.removed, []);
});

test("the current turn's pending input is never removed", () => {
  const question = user("Same question again", { idempotencyKey: "k" });
  const answer = reply("Same answer.");
  // OpenClaw's read fence keeps the turn's own user entry out of the entries; even when the
  // service names it, the message that has no entry before the fence stays.
  const pending = user("Same question again", { idempotencyKey: "k" });
  const messages = [...openclawView([question, answer]), structuredClone(pending.message)];
  const result = removeCopies(messages, [question, answer], dropped([pending, question]));
  assert.equal(result.messages, messages);
});

test("a copy whose original is not among the messages sent stays: it is the one the model reads", () => {
  const answer = reply("The notes are saved.");
  const summary = { role: "compactionSummary", summary: "Earlier: the notes were saved.", tokensBefore: 900, timestamp: 5 };
  const question = user("anything else?");
  const rewritten = copyOf(answer, { usage: { input: 0, output: 0, totalTokens: 0 } });
  const entries = [user("save the notes"), answer, question, rewritten];
  const messages = [summary, ...openclawView([question, rewritten])]; // compacted up to the question
  const result = removeCopies(messages, entries, dropped([rewritten, answer]));
  assert.equal(result.messages, messages);
  assert.match(result.unchanged[0], new RegExp(`copy ${rewritten.entryId} kept: the entry it repeats \\(${answer.entryId}\\) is not among`));
});

test("after a compaction summary the kept messages still map to their entries", () => {
  const earlier = [user("old question"), reply("Old answer.")];
  const answer = reply("New answer.");
  const echo = copyOf(answer, { usage: answer.message.usage });
  const later = [user("new question"), answer, echo];
  const summary = { role: "compactionSummary", summary: "Old question, old answer.", tokensBefore: 120, timestamp: 3 };
  const messages = [summary, ...openclawView(later)];
  const result = removeCopies(messages, [...earlier, ...later], dropped([echo, answer]));
  assert.equal(result.messages[0], summary);
  assert.deepEqual(textsOf(result.messages.slice(1)), ["new question", "New answer."]);
});

test("nothing is removed when it would separate a tool call from its result", () => {
  const call = reply(null, { toolCalls: ["call-1"], thinking: "Look." });
  const result1 = toolResult("call-1");
  // written again with the call's id rewritten (as OpenClaw's id sanitizer may), its result too
  const copy = entry({ ...call.message, content: [call.message.content[0], { ...call.message.content[1], id: "call-2" }], timestamp: call.message.timestamp + 10 });
  const result2 = toolResult("call-2");
  const entries = [user("list files"), call, result1, copy, result2];
  const messages = openclawView(entries);
  const result = removeCopies(messages, entries, dropped([copy, call]));
  assert.equal(result.messages, messages);
  assert.match(result.unchanged.at(-1), /separate tool call call-2 from its result/);
  // with its result dropped too, both leave and the pair that stays is whole
  const both = removeCopies(messages, entries, dropped([copy, call], [result2, result1]));
  assert.deepEqual(both.messages.map((m) => m.role), ["user", "assistant", "toolResult"]);
  assert.deepEqual(both.removed.map((r) => r.entryId), [copy.entryId, result2.entryId]);
});

test("a user message merged with its replay becomes the original again", () => {
  const question = user("Deploy now?", { idempotencyKey: "inbound-7" });
  const replay = user("Deploy now?", { idempotencyKey: "inbound-7", provenance: { kind: "retry" } });
  const messages = openclawView([question, replay]);
  assert.deepEqual(messages[0].content, [{ type: "text", text: "Deploy now?" }, { type: "text", text: "Deploy now?" }]);
  const result = removeCopies(messages, [question, replay], dropped([replay, question]));
  assert.deepEqual(result.messages, [question.message]);
});

test("a copy merged ahead of the reply it repeats leaves the message as OpenClaw made it", () => {
  const answer = reply("Ready.", { thinking: null });
  const early = copyOf(answer, { api: "cli", timestamp: answer.message.timestamp - 1 });
  const entries = [user("ready?"), early, answer];
  const messages = openclawView(entries);
  const result = removeCopies(messages, entries, dropped([early, answer]));
  assert.equal(result.messages, messages);
  assert.match(result.unchanged[0], /merged ahead of the entry they repeat/);
});

test("a message whose blocks OpenClaw rewrote is left alone", () => {
  const answer = reply("Visible text [[reply_to_current]]");
  const cli = copyOf(answer, { api: "cli" });
  const entries = [user("q"), answer, cli];
  const messages = openclawView(entries);
  messages[1].content[1] = { type: "text", text: "Visible text" }; // OpenClaw stripped a tag
  const result = removeCopies(messages, entries, dropped([cli, answer]));
  assert.equal(result.messages, messages);
});

test("of two byte-identical user messages, the later one is the copy removed", () => {
  const question = user("Same words");
  const twin = entry(structuredClone(question.message)); // persisted again, same timestamp
  const answer = reply("Answer.");
  const entries = [question, answer, twin];
  const messages = openclawView(entries);
  const result = removeCopies(messages, entries, dropped([twin, question]));
  assert.deepEqual(result.messages, messages.slice(0, 2));
  assert.equal(result.messages[0], messages[0]);
});

test("random transcripts: only dropped entries leave, kept blocks stay the same objects, pairs stay whole", () => {
  let seed = 7;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let round = 0; round < 300; round += 1) {
    const entries = [];
    const drops = new Map();
    for (let turn = 0; turn < 1 + Math.floor(random() * 4); turn += 1) {
      const question = user(`question ${round}.${turn}`);
      entries.push(question);
      if (random() < 0.3) { const call = reply(null, { toolCalls: [`c${round}.${turn}`] }); entries.push(call, toolResult(`c${round}.${turn}`)); }
      const answer = reply(`answer ${round}.${turn}`, { thinking: random() < 0.5 ? `thought ${turn}` : null });
      entries.push(answer);
      for (let n = Math.floor(random() * 3); n > 0; n -= 1) {
        const copy = copyOf(answer, { api: random() < 0.5 ? "cli" : "anthropic-messages" });
        entries.push(copy);
        if (random() < 0.7) drops.set(copy.entryId, answer.entryId);
      }
      if (random() < 0.2) { const replay = user(`question ${round}.${turn}`); entries.push(replay); drops.set(replay.entryId, question.entryId); }
    }
    if (random() < 0.2) drops.set(entries[0].entryId, "elsewhere"); // a verdict about a kept entry's id never comes, but stay safe
    const messages = openclawView(entries);
    const result = removeCopies(messages, entries, drops);
    const removedIds = new Set(result.removed.map((r) => r.entryId));
    for (const id of removedIds) assert.ok(drops.has(id));
    const keptTexts = entries.filter((e) => !removedIds.has(e.entryId)).flatMap((e) => textsOf([e.message]));
    assert.deepEqual(textsOf(result.messages), keptTexts, `round ${round}`);
    const blocksIn = new Set(messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])));
    for (const m of result.messages) if (Array.isArray(m.content) && !messages.includes(m)) for (const b of m.content) assert.ok(blocksIn.has(b));
    const calls = result.messages.flatMap((m) => (m.role === "assistant" ? m.content.filter((b) => b.type === "toolCall").map((b) => b.id) : []));
    const results = result.messages.filter((m) => m.role === "toolResult").map((m) => m.toolCallId);
    assert.deepEqual(new Set(calls), new Set(results));
    const roles = result.messages.map((m) => m.role);
    assert.ok(roles.every((role, i) => i === 0 || role !== roles[i - 1] || role === "toolResult"), `round ${round}: ${roles}`);
    if (messages.at(-1).role !== "user") assert.notEqual(roles.at(-1), "user", `round ${round}`);
  }
});

test("a copy between two replies stays: removed, the replies would meet as one assistant turn", () => {
  const question = user("Deploy?", { idempotencyKey: "k" });
  const first = reply("Deploying.");
  const replay = user("Deploy?", { idempotencyKey: "k" });
  const second = reply("Deploying again.");
  const entries = [question, first, replay, second];
  const messages = openclawView(entries);
  const result = removeCopies(messages, entries, dropped([replay, question]));
  assert.equal(result.messages, messages);
  assert.match(result.unchanged[0], new RegExp(`copies ${replay.entryId} kept: without them two assistant messages would meet`));
});

test("a copy that is the last message stays when a user message would be left last", () => {
  const question = user("Status?");
  const answer = reply("Green.");
  const late = copyOf(answer, { api: "cli" });
  const next = user("And now?");
  const entries = [question, answer, next, late];
  const messages = openclawView(entries);
  const result = removeCopies(messages, entries, dropped([late, answer]));
  assert.equal(result.messages, messages);
  assert.match(result.unchanged[0], /a user message would meet the turn's prompt/);
});

test("a question written twice with one timestamp and merged is told apart by its blocks", () => {
  const first = [user("Hello"), reply("Hi.")];
  const question = user("Is the report sent?", { idempotencyKey: "run-2:user" });
  const replay = entry(structuredClone(question.message)); // the same message, key and time
  const answer = reply("Yes.");
  const entries = [...first, question, replay, answer];
  const messages = openclawView(entries);
  const result = removeCopies(messages, entries, dropped([replay, question]));
  assert.deepEqual(textsOf(result.messages), ["Hello", "Hi.", "Is the report sent?", "Yes."]);
  assert.deepEqual(result.removed.map((r) => r.entryId), [replay.entryId]);
});
