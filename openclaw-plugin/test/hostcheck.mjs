// Type-checks the plugin's source against the declarations of the OpenClaw it is built for (the
// release make openclaw installs), not only against types/openclaw.d.ts, the subset it
// declares for its build: a change in OpenClaw's ContextEngine or plugin API fails here.
//   node test/hostcheck.mjs        (from the plugin folder; exit code 1 on a type error)
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const plugin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const cache = process.env.SESSION_STREAM_CACHE ?? path.join(os.homedir(), ".cache", "session-stream");
const host = path.join(cache, "openclaw", "openclaw-2026.9.6", "node_modules", "openclaw", "dist");
if (!existsSync(path.join(host, "plugin-sdk", "core.d.ts"))) {
  console.error(`OpenClaw 2026.9.6 is not at ${host}: run \`make openclaw\``);
  process.exit(1);
}
const scratch = mkdtempSync(path.join(os.tmpdir(), "session-stream-hostcheck-"));
try {
  // The names src imports from openclaw/plugin-sdk/core that 2026.9.6 exports from other
  // subpaths, taken from its own types; the rest is its core module as it is.
  writeFileSync(path.join(scratch, "core.d.ts"), `
export * from "${host}/plugin-sdk/core.js";
import type { HarnessContextEngine } from "${host}/plugin-sdk/agent-harness-runtime.js";
export type ContextEngine = HarnessContextEngine;
export type AssembleParams = Parameters<HarnessContextEngine["assemble"]>[0];
export type AssembleResult = Awaited<ReturnType<HarnessContextEngine["assemble"]>>;
export type AgentMessage = AssembleParams["messages"][number];
export type CompactParams = Parameters<HarnessContextEngine["compact"]>[0];
export type CompactResult = Awaited<ReturnType<HarnessContextEngine["compact"]>>;
export type CommitTurnParams = Parameters<NonNullable<HarnessContextEngine["commitTurn"]>>[0];
`);
  // session-transcript-runtime ships no declarations: the plugin's own stand for it.
  writeFileSync(path.join(scratch, "transcript.d.ts"), `export * from "${plugin}/types/transcript-runtime.js";\n`);
  writeFileSync(path.join(scratch, "tsconfig.json"), JSON.stringify({
    compilerOptions: {
      target: "ES2023", module: "NodeNext", moduleResolution: "NodeNext", lib: ["ES2023", "DOM"], types: ["node"],
      typeRoots: [path.join(plugin, "node_modules", "@types")], noEmit: true, strict: true, skipLibCheck: true,
      paths: {
        "openclaw/plugin-sdk/core": [path.join(scratch, "core.d.ts")],
        "openclaw/plugin-sdk/session-transcript-runtime": [path.join(scratch, "transcript.d.ts")],
      },
    },
    files: [path.join(plugin, "src", "index.ts")],
  }));
  execFileSync(process.execPath, [path.join(plugin, "node_modules", "typescript", "bin", "tsc"), "-p", path.join(scratch, "tsconfig.json")], { stdio: "inherit" });
  console.log(`src/ type-checks against OpenClaw's own declarations (${host})`);
} catch {
  process.exitCode = 1;
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
