// The transcript's visible message entries up to the current turn, read with OpenClaw's own
// SDK: readSessionTranscriptVisibleMessageDelta pages from a cursor this process keeps per
// session, so a turn reads what was appended since the last one, not the whole transcript
// (readVisibleSessionTranscriptMessageEntries). Called inside assemble(), the reads stop
// before the current turn's user entry (OpenClaw's read fence): the pending input is never
// among them. A rewritten transcript (a new generation, a moved branch) answers "reset", and
// the session is read again from its start.

import type { TranscriptScope, VisibleMessageEntry } from "openclaw/plugin-sdk/session-transcript-runtime";

type Sdk = typeof import("openclaw/plugin-sdk/session-transcript-runtime");
type Read = { cursor: string | undefined; entries: VisibleMessageEntry[] };

const PAGE_MESSAGES = 1000;
const PAGE_BYTES = 16 * 1024 * 1024;
// Sessions whose entries this process keeps between turns, the least recently read forgotten.
const SESSIONS_KEPT = 32;

export class TranscriptUnavailable extends Error {}

export class Transcripts {
  private readonly sessions = new Map<string, Read>();
  private loaded: Promise<Sdk> | undefined;

  constructor(private readonly load: () => Promise<Sdk>) {}

  // Loads OpenClaw's reader module now rather than in the first turn's assemble, whose deadline
  // its loading alone could take.
  warm(): void {
    this.sdk().catch(() => undefined);
  }

  private sdk(): Promise<Sdk> {
    this.loaded ??= this.load();
    this.loaded.catch(() => {
      this.loaded = undefined; // a failed load is tried again next turn
    });
    return this.loaded;
  }

  async visible(scope: TranscriptScope): Promise<VisibleMessageEntry[]> {
    const key = `${scope.agentId ?? ""}\u0000${scope.sessionId}`;
    const known = this.sessions.get(key);
    this.sessions.delete(key);
    let read: Read;
    try {
      read = await this.readFrom(scope, known ?? { cursor: undefined, entries: [] });
    } catch (error) {
      // A cursor past the current fence (the same turn run again) fails: read from the start.
      if (!known || !(error instanceof Error) || error.name !== "SessionTranscriptReadFenceError") throw error;
      read = await this.readFrom(scope, { cursor: undefined, entries: [] });
    }
    this.sessions.set(key, read);
    if (this.sessions.size > SESSIONS_KEPT) this.sessions.delete(this.sessions.keys().next().value!);
    return read.entries;
  }

  private async readFrom(scope: TranscriptScope, from: Read): Promise<Read> {
    const sdk = await this.sdk();
    let { cursor } = from;
    const entries = [...from.entries];
    let resets = 0;
    for (;;) {
      const page = await sdk.readSessionTranscriptVisibleMessageDelta({ ...scope, cursor, maxMessages: PAGE_MESSAGES, maxBytes: PAGE_BYTES });
      if (page.kind === "missing") return { cursor: undefined, entries: [] };
      if (page.kind === "unavailable") throw new TranscriptUnavailable(`transcript unavailable: ${page.reason}`);
      if (page.kind === "reset") {
        if (++resets > 1) throw new TranscriptUnavailable(`transcript read reset twice (${page.reason})`);
        cursor = page.cursor;
        entries.length = 0;
        continue;
      }
      if (page.entries.length === 0 && page.hasMore) throw new TranscriptUnavailable(`a message larger than ${PAGE_BYTES} bytes`);
      entries.push(...page.entries);
      cursor = page.cursor;
      if (!page.hasMore) return { cursor, entries };
    }
  }
}
