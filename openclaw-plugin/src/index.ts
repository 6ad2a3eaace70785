// The plugin's entry: registers the `session-stream` context engine. OpenClaw calls register()
// more than once per process (its full and discovery registrations) and the engine factory once
// per turn; the transcript cache, the service connection and the ledger are the registration's,
// shared by the turns' engines.

import os from "node:os";
import path from "node:path";

import {
  buildMemorySystemPromptAddition,
  definePluginEntry,
  delegateCompactionToRuntime,
  type OpenClawPluginApi,
} from "openclaw/plugin-sdk/core";

import { settingsFrom } from "./config.js";
import { createEngine, ENGINE_ID } from "./engine.js";
import { Ledger } from "./ledger.js";
import { Transcripts } from "./transcript.js";
import { VerdictClient } from "./verdicts.js";

function openclawStateDir(api: OpenClawPluginApi): string {
  try {
    return api.runtime.state.resolveStateDir();
  } catch {
    return path.join(os.homedir(), ".openclaw");
  }
}

export default definePluginEntry({
  id: ENGINE_ID,
  name: "session-stream",
  description: "Leaves the transcript entries session-stream dropped as copies out of what the model is sent",
  register(api: OpenClawPluginApi) {
    const settings = settingsFrom(api.pluginConfig, openclawStateDir(api));
    const host = {
      settings,
      logger: api.logger,
      transcripts: new Transcripts(() => import("openclaw/plugin-sdk/session-transcript-runtime")),
      verdicts: new VerdictClient(settings.serviceUrl, settings.tokenFile),
      ledger: new Ledger(settings.stateDir),
      delegateCompaction: delegateCompactionToRuntime,
      memoryPrompt: buildMemorySystemPromptAddition,
    };
    if (api.registrationMode === "full") {
      host.transcripts.warm();
      host.verdicts.warm();
      api.logger.info(`[${ENGINE_ID}] context engine registered: verdicts from ${settings.serviceUrl}, deadline ${settings.deadlineMs} ms`);
    }
    api.registerContextEngine(ENGINE_ID, () => createEngine(host));
  },
});
