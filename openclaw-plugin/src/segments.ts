// Which transcript entries each of OpenClaw's messages was made from.
//
// OpenClaw (2026.9.6) hands assemble() the replay view of the transcript, not the entries: its
// sanitizer drops some entries (transcript-only mirrors, empty replies), its turn validator
// merges consecutive assistant messages into one (`{...first, content: [...all blocks],
// usage/stopReason/errorMessage of the last}`) and consecutive user messages into one
// (`{...last, content: [...all blocks], timestamp: last.timestamp}`, string content as one
// text block), a compaction replaces what came before its first kept entry with a summary
// message, and the history limit cuts old turns. Messages carry no entry id, but a message is
// its entry's `message` object or a copy of it, so role and numeric timestamp identify it: the
// first entry of a merged assistant message, the last of a merged user message. The blocks
// tell the rest: a merged message's content is its entries' blocks, in order, each entry's
// whole or without its thinking blocks (a provider that is sent no thinking), entries the
// sanitizer dropped missing.

import { isDeepStrictEqual } from "node:util";

// OpenClaw's Message is a union of message kinds (user, assistant, toolResult, custom,
// compactionSummary, ...): read here as a record.
export type Message = { role: string; timestamp?: unknown; content?: unknown; [field: string]: unknown };
export type Entry = { entryId: string; role: string; message: Message };
export type Segment = { entry: Entry; start: number; end: number };
// A message and the entries it was made from, with the blocks each one gave it.
export type Made = { index: number; message: Message; segments: Segment[] };

const THINKING = new Set(["thinking", "redacted_thinking"]);
// Entries tried as parts of one merged message, at most: a merge longer than this is left as
// OpenClaw made it.
const MOST_PARTS = 16;

export function blocksOf(content: unknown): unknown[] | undefined {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return Array.isArray(content) ? content : undefined;
}

function isThinking(block: unknown): boolean {
  return typeof block === "object" && block !== null && THINKING.has(String((block as { type?: unknown }).type));
}

// The forms an entry's blocks take in a message OpenClaw sends: as written, or without thinking.
function forms(entry: Entry): unknown[][] {
  const blocks = blocksOf(entry.message.content);
  if (!blocks) return [];
  const withoutThinking = blocks.filter((block) => !isThinking(block));
  return withoutThinking.length === blocks.length ? [blocks] : [blocks, withoutThinking];
}

function matchesAt(content: unknown[], at: number, blocks: unknown[]): boolean {
  if (at + blocks.length > content.length) return false;
  return blocks.every((block, offset) => isDeepStrictEqual(content[at + offset], block));
}

// Splits `content` into the blocks of `parts` (in order; a part may be missing), the `anchor`
// part present; undefined when no split accounts for every block. Equal blocks could be more
// than one part's: a copy is taken for missing and a kept entry for present while that still
// accounts for every block, so a doubt keeps the blocks.
function split(content: unknown[], parts: Entry[], anchor: Entry, copies: ReadonlySet<string>): Segment[] | undefined {
  const walk = (part: number, at: number): Segment[] | undefined => {
    if (part === parts.length) return at === content.length ? [] : undefined;
    const entry = parts[part]!;
    const present = (): Segment[] | undefined => {
      for (const blocks of forms(entry)) {
        if (blocks.length === 0 || !matchesAt(content, at, blocks)) continue;
        const rest = walk(part + 1, at + blocks.length);
        if (rest) return [{ entry, start: at, end: at + blocks.length }, ...rest];
      }
      return undefined;
    };
    const missing = (): Segment[] | undefined => (entry === anchor ? undefined : walk(part + 1, at));
    return copies.has(entry.entryId) ? missing() ?? present() : present() ?? missing();
  };
  return walk(0, 0);
}

function sameMessage(message: Message, entry: Entry): boolean {
  return entry.role === message.role && typeof message.timestamp === "number" && entry.message.timestamp === message.timestamp;
}

// For each message that can be told apart into its entries, those entries and their blocks
// (`copies`: the ids of the entries that were dropped). Messages that cannot (a summary, a message without its entry, content OpenClaw rewrote) are
// left out: nothing is removed from them.
export function madeFrom(messages: Message[], entries: Entry[], copies: ReadonlySet<string>): Made[] {
  const made: Made[] = [];
  let next = 0; // entries before this one belong to earlier messages
  messages.forEach((message, index) => {
    let found = entries.findIndex((entry, position) => position >= next && sameMessage(message, entry));
    if (found < 0) return;
    const parts: Entry[] = [];
    if (message.role === "user") {
      // A user merge has its last message's timestamp, which an earlier one in the run may share.
      for (let position = found + 1; position < entries.length && entries[position]!.role === "user"; position += 1) {
        if (sameMessage(message, entries[position]!)) found = position;
      }
      for (let position = found; position >= next && entries[position]!.role === "user" && found - position < MOST_PARTS; position -= 1) {
        parts.unshift(entries[position]!);
      }
    } else {
      for (let position = found; position < entries.length && entries[position]!.role === message.role && position - found < MOST_PARTS; position += 1) {
        parts.push(entries[position]!);
      }
    }
    const content = blocksOf(message.content);
    const segments = content ? split(content, parts, entries[found]!, copies) : undefined;
    if (!segments) {
      next = found + 1;
      return;
    }
    made.push({ index, message, segments });
    next = entries.indexOf(segments.at(-1)!.entry) + 1;
  });
  return made;
}
