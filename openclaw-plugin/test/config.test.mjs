import assert from "node:assert/strict";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";

import { settingsFrom } from "../dist/config.js";

test("without configuration the plugin looks for the service and its token where the docs say", () => {
  assert.deepEqual(settingsFrom(undefined, "/home/u/.openclaw"), {
    serviceUrl: "http://127.0.0.1:6067",
    tokenFile: "/home/u/.openclaw/session-stream/verdicts.token",
    deadlineMs: 50,
    stateDir: "/home/u/.openclaw/session-stream",
    traceFile: undefined,
  });
});

test("configured values win, and a deadline that is no positive number is the default", () => {
  const settings = settingsFrom({ serviceUrl: "http://127.0.0.1:7000", stateDir: "/var/lib/ss", deadlineMs: 0 }, "/x");
  assert.deepEqual([settings.serviceUrl, settings.tokenFile, settings.deadlineMs], ["http://127.0.0.1:7000", "/var/lib/ss/verdicts.token", 50]);
});

test("a path in the configuration may start at the home folder", () => {
  const settings = settingsFrom({ tokenFile: "~/.openclaw/session-stream/verdicts.token" }, "/x");
  assert.equal(settings.tokenFile, path.join(os.homedir(), ".openclaw/session-stream/verdicts.token"));
});
