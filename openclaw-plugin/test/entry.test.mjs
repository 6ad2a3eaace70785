// The plugin's entry as OpenClaw's loader calls it: the engine id, the defaults it settles on.
import assert from "node:assert/strict";
import { registerHooks } from "node:module";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

const stub = pathToFileURL(path.join(path.dirname(fileURLToPath(import.meta.url)), "sdk-stub.mjs")).href;
registerHooks({
  resolve: (specifier, context, next) => (specifier.startsWith("openclaw/plugin-sdk/") ? { url: stub, shortCircuit: true } : next(specifier, context)),
});
const { default: entry } = await import("../dist/index.js");

test("register() registers the session-stream engine, every registration the same way", async () => {
  const registered = [];
  const lines = [];
  for (const registrationMode of ["full", "discovery"]) {
    entry.register({
      id: "session-stream", name: "session-stream", registrationMode, pluginConfig: { tokenFile: "/nonexistent/verdicts.token" },
      logger: { info: (line) => lines.push(line), warn() {}, error() {} },
      runtime: { state: { resolveStateDir: () => "/home/someone/.openclaw" } },
      registerContextEngine: (id, factory) => registered.push([id, factory]),
    });
  }
  assert.deepEqual(registered.map(([id]) => id), ["session-stream", "session-stream"]);
  const engine = await registered[0][1]({});
  assert.equal(engine.info.id, "session-stream");
  assert.deepEqual(lines, ["[session-stream] context engine registered: verdicts from http://127.0.0.1:6067, deadline 50 ms"]);
});
