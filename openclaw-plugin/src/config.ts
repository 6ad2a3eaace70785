// plugins.entries.session-stream.config in openclaw.json (openclaw.plugin.json has its schema).

import os from "node:os";
import path from "node:path";

export const DEFAULT_SERVICE_URL = "http://127.0.0.1:6067";
export const DEFAULT_DEADLINE_MS = 50;

export type Settings = {
  serviceUrl: string;
  tokenFile: string;
  deadlineMs: number;
  stateDir: string;
  traceFile: string | undefined;
};

const text = (value: unknown): string | undefined => (typeof value === "string" && value.trim() ? value : undefined);
// A path as openclaw.json may spell it: `~/` is the home folder, as in a shell.
const file = (value: unknown): string | undefined => {
  const given = text(value);
  return given?.startsWith("~/") ? path.join(os.homedir(), given.slice(2)) : given;
};

// `openclawStateDir`: OpenClaw's state folder (~/.openclaw), where the plugin keeps its own
// folder and, by default, looks for the service's token.
export function settingsFrom(config: Record<string, unknown> | undefined, openclawStateDir: string): Settings {
  const stateDir = file(config?.stateDir) ?? path.join(openclawStateDir, "session-stream");
  const deadline = config?.deadlineMs;
  return {
    serviceUrl: text(config?.serviceUrl) ?? DEFAULT_SERVICE_URL,
    tokenFile: file(config?.tokenFile) ?? path.join(stateDir, "verdicts.token"),
    deadlineMs: typeof deadline === "number" && deadline > 0 ? deadline : DEFAULT_DEADLINE_MS,
    stateDir,
    traceFile: file(config?.traceFile),
  };
}
