// openclaw/plugin-sdk/session-transcript-runtime, which 2026.9.6 ships without declarations:
// these follow dist/session-transcript-runtime-*.mjs and
// dist/session-accessor.sqlite-active-events-*.mjs (tsconfig.json maps the module here).
import type { AgentMessage } from "openclaw/plugin-sdk/core";

export type TranscriptScope = { agentId?: string; sessionId: string; sessionKey?: string; storePath?: string };
export type VisibleMessageEntry = {
  entryId: string;
  parentId: string | null;
  seq: number;
  message: AgentMessage;
  role: string;
  createdAt?: string;
  idempotencyKey?: string;
};
export type VisibleMessageDelta =
  | { kind: "page"; cursor: string; entries: VisibleMessageEntry[]; hasMore: boolean; requiredBytes?: number; serializedBytes: number }
  | { kind: "reset"; cursor: string; reason: string }
  | { kind: "missing" }
  | { kind: "unavailable"; reason: string };

export function readSessionTranscriptVisibleMessageDelta(
  params: TranscriptScope & { cursor?: string; maxBytes?: number; maxMessages?: number },
): Promise<VisibleMessageDelta>;
export function readVisibleSessionTranscriptMessageEntries(params: TranscriptScope): Promise<VisibleMessageEntry[]>;
