// The `session-stream` context engine, in OpenClaw's delegating mode: assemble() returns
// OpenClaw's messages less the copies session-stream dropped; compaction, ingestion and
// everything else stay OpenClaw's. It declares OpenClaw's transcript semantics and commits
// turns atomically and idempotently (ledger.ts), without which OpenClaw 2026.9.6 runs a normal
// user turn on its legacy engine instead.
//
// It never throws: OpenClaw quarantines an engine that does until the Gateway restarts. Every
// failure, a service that does not answer within the deadline, or verdicts that lag the
// transcript leave the messages as OpenClaw made them, with one log line.

import { appendFile } from "node:fs/promises";
import { performance } from "node:perf_hooks";

import type {
  AgentMessage,
  AssembleParams,
  AssembleResult,
  CommitTurnParams,
  CompactParams,
  CompactResult,
  ContextEngine,
  PluginLogger,
  buildMemorySystemPromptAddition,
} from "openclaw/plugin-sdk/core";

import type { Settings } from "./config.js";
import type { Ledger } from "./ledger.js";
import { removeCopies, type Removed } from "./removal.js";
import type { Entry, Message } from "./segments.js";
import type { Transcripts } from "./transcript.js";
import type { VerdictClient } from "./verdicts.js";

export const ENGINE_ID = "session-stream";
export const ENGINE_VERSION = "0.1.0";

export type Host = {
  settings: Settings;
  logger: PluginLogger;
  transcripts: Transcripts;
  verdicts: VerdictClient;
  ledger: Ledger;
  delegateCompaction: (params: CompactParams) => Promise<CompactResult>;
  memoryPrompt: typeof buildMemorySystemPromptAddition;
};

type Outcome =
  | { kind: "removed"; messages: AgentMessage[]; removed: Removed[]; notes: string[] }
  | { kind: "nothing"; notes: string[] } // nothing to remove: the messages as OpenClaw made them
  | { kind: "unchanged"; why: string }; // could not tell: the messages as OpenClaw made them

class DeadlinePassed extends Error {}

const agentOf = (sessionKey: string | undefined): string | undefined => {
  const parts = sessionKey?.split(":");
  return parts?.[0] === "agent" && parts[1] ? parts[1] : undefined;
};

export function createEngine(host: Host): ContextEngine {
  const { settings, logger } = host;
  const say = (level: "info" | "warn", line: string): void => {
    try {
      logger[level](`[${ENGINE_ID}] ${line}`);
    } catch {
      // a logger that fails must not fail the turn
    }
  };

  // `took`: milliseconds per step, for the trace.
  const decide = async (params: AssembleParams, signal: AbortSignal, took: Record<string, number>): Promise<Outcome> => {
    const scope = { agentId: agentOf(params.sessionKey), sessionId: params.sessionId, sessionKey: params.sessionKey };
    let started = performance.now();
    const entries = await host.transcripts.visible(scope);
    took.readMs = performance.now() - started;
    if (entries.length === 0 || params.messages.length === 0) return { kind: "nothing", notes: [] };
    const through = entries.at(-1)!.entryId;
    started = performance.now();
    const predecessors = await host.ledger.predecessors(params.sessionId);
    const verdicts = await host.verdicts.ask(params.sessionId, through, predecessors, signal);
    took.askMs = performance.now() - started;
    if (!verdicts.processed) return { kind: "unchanged", why: `verdicts lag the transcript (${verdicts.reason ?? `entry ${through} not processed yet`})` };
    if (verdicts.dropped.size === 0) return { kind: "nothing", notes: [] };
    const removal = removeCopies(params.messages as unknown as Message[], entries as unknown as Entry[], verdicts.dropped);
    if (removal.removed.length === 0) return { kind: "nothing", notes: removal.unchanged };
    return { kind: "removed", messages: removal.messages as unknown as AgentMessage[], removed: removal.removed, notes: removal.unchanged };
  };

  const trace = (record: Record<string, unknown>): void => {
    if (!settings.traceFile) return;
    appendFile(settings.traceFile, `${JSON.stringify({ at: new Date().toISOString(), ...record })}\n`).catch(() => undefined);
  };

  return {
    info: {
      id: ENGINE_ID,
      name: "session-stream",
      version: ENGINE_VERSION,
      ownsCompaction: false,
      transcriptSemantics: {
        currentTurnFence: "before-current-turn-entry-v1",
        turnAdvancementIdempotency: "atomic-idempotent-v1",
      },
    },

    async ingest() {
      // Admitted turns reach the engine through commitTurn; the verdicts come from the service.
      return { ingested: false };
    },

    async assemble(params: AssembleParams): Promise<AssembleResult> {
      const started = performance.now();
      const took: Record<string, number> = {};
      const messages = params.messages;
      let systemPromptAddition: string | undefined;
      let outcome: Outcome;
      try {
        // OpenClaw leaves its memory guidance out of the system prompt of a non-legacy engine
        // and offers it back through this: without it, installing the plugin would change more
        // than the copies the model is sent.
        systemPromptAddition = host.memoryPrompt({ availableTools: params.availableTools ?? new Set(), citationsMode: params.citationsMode });
        took.memoryMs = performance.now() - started;
      } catch (error) {
        say("warn", `session ${params.sessionId}: OpenClaw's memory guidance could not be added: ${String(error)}`);
      }
      const controller = new AbortController();
      let timer: NodeJS.Timeout | undefined;
      try {
        const deadline = new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            controller.abort();
            reject(new DeadlinePassed());
          }, settings.deadlineMs);
        });
        const decided = decide(params, controller.signal, took);
        decided.catch(() => undefined); // settled after the deadline: nobody waits for it
        outcome = await Promise.race([decided, deadline]);
      } catch (error) {
        outcome = {
          kind: "unchanged",
          why: error instanceof DeadlinePassed ? `no verdicts within ${settings.deadlineMs} ms` : String(error),
        };
      } finally {
        clearTimeout(timer);
      }
      const sent = outcome.kind === "removed" ? outcome.messages : messages;
      if (outcome.kind === "unchanged") {
        say(outcome.why.startsWith("verdicts lag") ? "info" : "warn", `session ${params.sessionId}: messages unchanged: ${outcome.why}`);
      } else if (outcome.kind === "removed") {
        const ids = outcome.removed.map(({ entryId, repeats }) => `${entryId} (repeats ${repeats})`).join(", ");
        say("info", `session ${params.sessionId}: left out ${outcome.removed.length} ${outcome.removed.length === 1 ? "copy" : "copies"}: ${ids}`);
      }
      if (outcome.kind !== "unchanged" && outcome.notes.length > 0) say("info", `session ${params.sessionId}: ${outcome.notes.join("; ")}`);
      trace({
        event: "assemble",
        sessionId: params.sessionId,
        sessionKey: params.sessionKey,
        outcome: outcome.kind,
        why: outcome.kind === "unchanged" ? outcome.why : undefined,
        removed: outcome.kind === "removed" ? outcome.removed : [],
        messages: messages.length,
        sent: sent.length,
        elapsedMs: performance.now() - started,
        ...took,
        selection: params.runtimeSettings?.contextEngineSelection,
        executionHost: params.runtimeSettings?.executionHost?.id,
        mode: params.runtimeSettings?.runtime?.mode,
      });
      return { messages: sent, estimatedTokens: 0, ...(systemPromptAddition ? { systemPromptAddition } : {}) };
    },

    async compact(params: CompactParams): Promise<CompactResult> {
      try {
        const result = await host.delegateCompaction(params);
        const successor = result.result?.sessionTarget?.sessionId ?? result.result?.sessionId;
        trace({ event: "compact", sessionId: params.sessionId, ok: result.ok, compacted: result.compacted, successor: successor ?? null, firstKeptEntryId: result.result?.firstKeptEntryId ?? null });
        if (result.ok && result.compacted && successor && successor !== params.sessionId) {
          await host.ledger.follow(successor, params.sessionId).catch((error: unknown) =>
            say("warn", `session ${params.sessionId}: its successor ${successor} is not recorded: ${String(error)}`));
        }
        return result;
      } catch (error) {
        say("warn", `session ${params.sessionId}: OpenClaw's compaction failed: ${String(error)}`);
        return { ok: false, compacted: false, reason: `session-stream: OpenClaw's compaction failed: ${String(error)}` };
      }
    },

    async commitTurn(params: CommitTurnParams) {
      try {
        const status = await host.ledger.commit(params.advancementKey, {
          sessionId: params.sessionId,
          sessionKey: params.sessionKey,
          admissionEntryId: params.admission.entryId,
          terminalEntryId: params.terminal.entryId,
          committedAt: new Date().toISOString(),
        });
        trace({ event: "commitTurn", sessionId: params.sessionId, advancementKey: params.advancementKey, status, admissionEntryId: params.admission.entryId, terminalEntryId: params.terminal.entryId });
        return { status };
      } catch (error) {
        // Not a throw: an answer other than committed/duplicate keeps OpenClaw's outbox row,
        // which it offers again before the session's next turn.
        say("warn", `session ${params.sessionId}: turn ${params.advancementKey} not committed, OpenClaw retries it: ${String(error)}`);
        return { status: "not-committed" } as unknown as { status: "committed" };
      }
    },

    async dispose() {
      // The transcript cache and the service connection outlive a turn's engine.
    },
  };
}
