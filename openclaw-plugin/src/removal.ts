// OpenClaw's messages less the copies session-stream dropped.
//
// A copy is removed whole: a message made only of copies leaves; from a message OpenClaw merged
// out of kept entries and copies, the copies' blocks leave and the kept entries' blocks stay,
// the very objects OpenClaw made, in their order (thinking blocks and their signatures byte
// for byte). Only what session-stream dropped is removed, and only when it can be done safely;
// otherwise the messages stay as OpenClaw made them and `unchanged` says why:
// - a copy stays when the entry it repeats is not among what the model is sent (compacted into
//   a summary, cut by the history limit): then the copy is the one place the model reads it;
// - a merged message whose identity is a copy's (the first entry of an assistant merge, the last
//   of a user merge, whose fields the merge spreads) stays whole;
// - a message is not removed when that would leave two user or two assistant messages side by
//   side, or end the history on a user message: OpenClaw's turn validator would have merged
//   them (into the turn's prompt, for the last), and a reply merged into the latest assistant
//   message is what makes Anthropic refuse "thinking blocks cannot be modified";
// - nothing is removed when it would leave a tool call without its result or a result without
//   its call.

import { blocksOf, madeFrom, type Entry, type Made, type Message, type Segment } from "./segments.js";

export type Removed = { entryId: string; repeats: string };
export type Removal = { messages: Message[]; removed: Removed[]; unchanged: string[] };

// The fields an assistant merge takes from the last message merged (mergeConsecutiveAssistantTurns).
const FROM_LAST = ["usage", "stopReason", "errorMessage"] as const;

export function removeCopies(
  messages: Message[],
  entries: Entry[],
  dropped: ReadonlyMap<string, string>,
): Removal {
  const made = madeFrom(messages, entries, new Set(dropped.keys()));
  const present = new Set(made.flatMap(({ segments }) => segments.map(({ entry }) => entry.entryId)));
  const unchanged: string[] = [];
  const removed: Removed[] = [];
  const replaced = new Map<number, Message | null>(); // message index -> new message, null: removed

  for (const one of made) {
    const copies = one.segments.filter(({ entry }) => dropped.has(entry.entryId));
    if (copies.length === 0) continue;
    const removable = copies.filter(({ entry }) => {
      const repeats = dropped.get(entry.entryId)!;
      if (present.has(repeats)) return true;
      unchanged.push(`copy ${entry.entryId} kept: the entry it repeats (${repeats}) is not among the messages sent`);
      return false;
    });
    if (removable.length === 0) continue;
    const next = without(one, new Set(removable));
    if (next === undefined) {
      unchanged.push(`copies ${removable.map(({ entry }) => entry.entryId).join(", ")} kept: merged ahead of the entry they repeat`);
      continue;
    }
    replaced.set(one.index, next);
    removed.push(...removable.map(({ entry }) => ({ entryId: entry.entryId, repeats: dropped.get(entry.entryId)! })));
  }
  for (const index of [...replaced.keys()].sort((a, b) => a - b)) {
    const meeting = replaced.get(index) === null ? meets(messages, replaced, index) : undefined;
    if (meeting === undefined) continue;
    replaced.delete(index);
    const ids = new Set(made.find((one) => one.index === index)!.segments.map(({ entry }) => entry.entryId));
    unchanged.push(`copies ${[...ids].join(", ")} kept: without them ${meeting}`);
    removed.splice(0, removed.length, ...removed.filter(({ entryId }) => !ids.has(entryId)));
  }
  if (replaced.size === 0) return { messages, removed: [], unchanged };
  const result = messages.flatMap((message, index) => {
    const next = replaced.get(index);
    return next === undefined ? [message] : next === null ? [] : [next];
  });
  const separated = separatedToolCalls(messages, result);
  if (separated.length > 0) {
    unchanged.push(`nothing removed: it would separate tool call ${separated.join(", ")} from its result`);
    return { messages, removed: [], unchanged };
  }
  return { messages: result, removed, unchanged };
}

// The message without the `gone` segments: null when nothing is left, undefined when the
// merge took the message's own fields from a copy.
function without(one: Made, gone: Set<Segment>): Message | null | undefined {
  const kept = one.segments.filter((segment) => !gone.has(segment));
  if (kept.length === 0) return null;
  const content = blocksOf(one.message.content)!;
  const blocks = kept.flatMap(({ start, end }) => content.slice(start, end));
  const first = one.segments[0]!, last = one.segments.at(-1)!;
  if (one.message.role === "user") {
    // A user merge spreads its last message: with that one gone, the last kept entry is the
    // message, its own fields as the transcript holds them. Left alone, a string stays one.
    const own = kept.at(-1)!.entry.message;
    const alone = kept.length === 1 && typeof own.content === "string" ? own.content : blocks;
    return gone.has(last) ? { ...own, content: alone } : { ...one.message, content: alone };
  }
  if (gone.has(first)) return undefined;
  const message: Message = { ...one.message, content: blocks };
  if (gone.has(last)) {
    for (const field of FROM_LAST) {
      const source = kept.findLast(({ entry }) => entry.message[field]);
      if (source) message[field] = source.entry.message[field];
      else delete message[field];
    }
  }
  return message;
}

const TURN_ROLES = new Set(["user", "assistant"]);

// What removing message `index` (with the removals decided so far) would make meet: two
// messages of one turn role side by side, or a user message and the turn's prompt.
function meets(messages: Message[], replaced: Map<number, Message | null>, index: number): string | undefined {
  const standing = (at: number): boolean => replaced.get(at) !== null;
  let before = index - 1, after = index + 1;
  while (before >= 0 && !standing(before)) before -= 1;
  while (after < messages.length && !standing(after)) after += 1;
  const previous = messages[before]?.role;
  if (after >= messages.length) return previous === "user" ? "a user message would meet the turn's prompt" : undefined;
  const next = messages[after]!.role;
  return previous !== undefined && previous === next && TURN_ROLES.has(previous) ? `two ${previous} messages would meet` : undefined;
}

type Pairing = { calls: Set<string>; results: Set<string> };

function pairing(messages: Message[]): Pairing {
  const calls = new Set<string>(), results = new Set<string>();
  for (const message of messages) {
    if (message.role === "toolResult" && typeof message.toolCallId === "string") results.add(message.toolCallId);
    if (message.role !== "assistant") continue;
    for (const block of blocksOf(message.content) ?? []) {
      const { type, id } = (block ?? {}) as { type?: unknown; id?: unknown };
      if ((type === "toolCall" || type === "toolUse") && typeof id === "string") calls.add(id);
    }
  }
  return { calls, results };
}

// Tool calls whose call and result were both sent before, and only one of them after.
function separatedToolCalls(before: Message[], after: Message[]): string[] {
  const was = pairing(before), now = pairing(after);
  return [...was.calls].filter((id) => was.results.has(id) && now.calls.has(id) !== now.results.has(id));
}
