// The part of OpenClaw 2026.9.6's plugin SDK core this plugin uses, as the package declares it
// (dist/plugin-entry-*.d.ts, region src/context-engine/types.d.ts; dist/agent-harness-runtime-
// *.d.ts for the helpers). At run time OpenClaw's loader resolves `openclaw/plugin-sdk/*` to its
// own dist files, so the plugin ships no copy of OpenClaw. test/hostcheck.mjs checks the source
// against the installed package's own declarations.

declare module "openclaw/plugin-sdk/core" {
  // A union in OpenClaw (user | assistant | toolResult | custom | bashExecution | branchSummary |
  // compactionSummary): the plugin reads every message as a record.
  export type AgentMessage = { role: string; timestamp?: number; content?: unknown; [key: string]: unknown };

  export type ContextEngineSessionTarget = {
    agentId?: string;
    sessionId?: string;
    sessionKey?: string;
    storePath?: string;
    threadId?: string | number;
  };

  export type ContextEngineRuntimeSettings = {
    schemaVersion: 1;
    runtime: { host: "openclaw"; mode: "normal" | "fallback" | "degraded"; harnessId: string | null; runtimeId: string | null };
    contextEngineSelection: { selectedId: string | null; source: "configured" | "default" | "unknown" };
    executionHost: { id: string | null; label: string | null };
    [key: string]: unknown;
  };

  export type TranscriptEntryAnchor = Readonly<{
    agentId: string;
    sessionId: string;
    sessionKey: string;
    storePath: string;
    generation: string;
    entryId: string;
    rawSeq: number;
    effectiveParentId: string | null;
    activeMessagePosition: number;
    idempotencyKey?: string;
  }>;
  export type TranscriptTurnAdmission = TranscriptEntryAnchor & Readonly<{ logicalTurnId: string; role: "user" }>;

  export type AssembleParams = {
    sessionId: string;
    sessionKey?: string;
    messages: AgentMessage[];
    tokenBudget?: number;
    availableTools?: Set<string>;
    citationsMode?: unknown;
    model?: string;
    prompt?: string;
    runtimeSettings?: ContextEngineRuntimeSettings;
    runtimeContext?: Record<string, unknown>;
  };
  export type AssembleResult = {
    messages: AgentMessage[];
    estimatedTokens: number;
    systemPromptAddition?: string;
  };

  export type CompactParams = {
    sessionId: string;
    sessionKey: string;
    agentId?: string;
    sessionTarget?: ContextEngineSessionTarget;
    tokenBudget?: number;
    force?: boolean;
    currentTokenCount?: number;
    compactionTarget?: "budget" | "threshold";
    customInstructions?: string;
    runtimeSettings?: ContextEngineRuntimeSettings;
    runtimeContext?: Record<string, unknown>;
    abortSignal?: AbortSignal;
  };
  export type CompactResult = {
    ok: boolean;
    compacted: boolean;
    reason?: string;
    result?: {
      summary?: string;
      firstKeptEntryId?: string;
      tokensBefore: number;
      tokensAfter?: number;
      details?: unknown;
      sessionId?: string;
      sessionTarget?: ContextEngineSessionTarget;
      sessionFile?: string;
    };
  };

  export type CommitTurnParams = {
    advancementKey: string;
    admission: TranscriptTurnAdmission;
    terminal: TranscriptEntryAnchor;
    messages: AgentMessage[];
    sessionId: string;
    sessionKey?: string;
    sessionTarget?: ContextEngineSessionTarget;
    isHeartbeat?: boolean;
  };

  export type ContextEngineInfo = {
    id: string;
    name: string;
    version?: string;
    transcriptSemantics?: {
      currentTurnFence?: "before-current-turn-entry-v1";
      turnAdvancementIdempotency?: "atomic-idempotent-v1";
    };
    ownsCompaction?: boolean;
  };

  export interface ContextEngine {
    readonly info: ContextEngineInfo;
    ingest(params: { sessionId: string; sessionKey?: string; message: AgentMessage; isHeartbeat?: boolean }): Promise<{ ingested: boolean }>;
    assemble(params: AssembleParams): Promise<AssembleResult>;
    compact(params: CompactParams): Promise<CompactResult>;
    commitTurn?(params: CommitTurnParams): Promise<{ status: "committed" | "duplicate" }>;
    dispose?(): Promise<void>;
  }

  export type ContextEngineFactory = (ctx: { config?: unknown; agentDir?: string; workspaceDir?: string }) => ContextEngine | Promise<ContextEngine>;

  export type PluginLogger = {
    debug?: (message: string) => void;
    info: (message: string) => void;
    warn: (message: string) => void;
    error: (message: string) => void;
  };

  export type OpenClawPluginApi = {
    id: string;
    name: string;
    registrationMode: string;
    pluginConfig?: Record<string, unknown>;
    logger: PluginLogger;
    runtime: { state: { resolveStateDir: () => string } };
    registerContextEngine: (id: string, factory: ContextEngineFactory) => void;
  };

  export function delegateCompactionToRuntime(params: CompactParams): Promise<CompactResult>;
  export function buildMemorySystemPromptAddition(params: { availableTools: Set<string>; citationsMode?: unknown }): string | undefined;
  export function definePluginEntry<T extends { id: string; name: string; description: string; register: (api: OpenClawPluginApi) => void }>(entry: T): T;
}
