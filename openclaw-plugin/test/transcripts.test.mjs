// Reading a session's entries with OpenClaw's delta reader: a page at a time, from where the
// last turn left off, again from the start when OpenClaw says the transcript changed.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Transcripts } from "../dist/transcript.js";
import { reply, user } from "./transcript.mjs";

// OpenClaw's readSessionTranscriptVisibleMessageDelta over `entries`, a cursor being a position;
// `generation` bumped, the cursor is reset as OpenClaw's is.
function fakeSdk(entries, { pageSize = 2 } = {}) {
  const sdk = {
    generation: 1,
    calls: [],
    failNext: undefined,
    async readSessionTranscriptVisibleMessageDelta({ cursor, maxMessages }) {
      sdk.calls.push(cursor);
      if (sdk.failNext) {
        const error = sdk.failNext;
        sdk.failNext = undefined;
        throw error;
      }
      assert.ok(maxMessages >= 1);
      const [generation, at] = cursor ? cursor.split(":").map(Number) : [sdk.generation, 0];
      if (generation !== sdk.generation) return { kind: "reset", cursor: `${sdk.generation}:0`, reason: "generation_mismatch" };
      const page = entries.slice(at, at + pageSize);
      return { kind: "page", cursor: `${generation}:${at + page.length}`, entries: page, hasMore: at + page.length < entries.length, serializedBytes: 0 };
    },
  };
  return sdk;
}

const scope = { agentId: "main", sessionId: "s1" };

test("the first read pages through the transcript, the next reads only what was appended", async () => {
  const entries = [user("a"), reply("A."), user("b"), reply("B."), user("c")];
  const sdk = fakeSdk(entries);
  const transcripts = new Transcripts(async () => sdk);
  assert.deepEqual(await transcripts.visible(scope), entries);
  assert.deepEqual(sdk.calls, [undefined, "1:2", "1:4"]);
  entries.push(reply("C."));
  sdk.calls.length = 0;
  assert.deepEqual(await transcripts.visible(scope), entries);
  assert.deepEqual(sdk.calls, ["1:5"]);
});

test("a rewritten transcript is read again from its start", async () => {
  const entries = [user("a"), reply("A.")];
  const sdk = fakeSdk(entries);
  const transcripts = new Transcripts(async () => sdk);
  await transcripts.visible(scope);
  entries.splice(0, 2, user("compacted"), reply("Kept."));
  sdk.generation = 2;
  assert.deepEqual((await transcripts.visible(scope)).map((e) => e.message.content), ["compacted", entries[1].message.content]);
});

test("a cursor past the current turn's fence is dropped and the session read from the start", async () => {
  const entries = [user("a"), reply("A."), user("b")];
  const sdk = fakeSdk(entries);
  const transcripts = new Transcripts(async () => sdk);
  await transcripts.visible(scope);
  const fence = new Error("Transcript read cursor has crossed the current-turn admission fence");
  fence.name = "SessionTranscriptReadFenceError";
  sdk.failNext = fence;
  sdk.calls.length = 0;
  assert.deepEqual(await transcripts.visible(scope), entries);
  assert.deepEqual(sdk.calls, ["1:3", undefined, "1:2"]);
});

test("a transcript OpenClaw is rebuilding, or any other failure, is the caller's to handle", async () => {
  const transcripts = new Transcripts(async () => ({ readSessionTranscriptVisibleMessageDelta: async () => ({ kind: "unavailable", reason: "projection_rebuilding" }) }));
  await assert.rejects(transcripts.visible(scope), /transcript unavailable: projection_rebuilding/);
  const missing = new Transcripts(async () => ({ readSessionTranscriptVisibleMessageDelta: async () => ({ kind: "missing" }) }));
  assert.deepEqual(await missing.visible(scope), []);
});

test("OpenClaw's reader module is loaded once, and again after a load that failed", async () => {
  let loads = 0;
  const sdk = fakeSdk([user("a")]);
  const transcripts = new Transcripts(async () => {
    loads += 1;
    if (loads === 1) throw new Error("not yet");
    return sdk;
  });
  transcripts.warm();
  await new Promise((resolve) => setImmediate(resolve));
  await transcripts.visible(scope);
  await transcripts.visible({ ...scope, sessionId: "s2" });
  assert.equal(loads, 2);
});
