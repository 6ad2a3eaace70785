// The plugin's own durable state, in its state folder:
//   turns/<sha256(advancementKey)>        one file per committed turn (commitTurn)
//   successors/<sha256(session id)>       the session a compaction moved this one from
// A turn is committed by linking a fully written, fsynced file to its name: link() creates the
// name only if it does not exist, so of any number of concurrent or repeated commits of one
// key exactly one answers "committed", the rest "duplicate", also across processes and
// restarts, and a crash leaves either no file or the whole one. Turn files are kept for
// RETENTION (OpenClaw retries a turn's commit before the session's next turn, not days later).

import { createHash, randomUUID } from "node:crypto";
import { link, mkdir, open, readdir, readFile, rename, stat, unlink } from "node:fs/promises";
import path from "node:path";

const RETENTION_MS = 7 * 24 * 3600 * 1000;
const PRUNE_EVERY_MS = 3600 * 1000;
const MOST_PREDECESSORS = 8;

const nameOf = (key: string): string => createHash("sha256").update(key).digest("hex");

async function syncFolder(folder: string): Promise<void> {
  const handle = await open(folder, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function writeSynced(file: string, text: string): Promise<void> {
  const handle = await open(file, "wx", 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export class Ledger {
  private prunedAt = 0;

  constructor(private readonly folder: string) {}

  async commit(advancementKey: string, record: Record<string, unknown>): Promise<"committed" | "duplicate"> {
    const turns = path.join(this.folder, "turns");
    await mkdir(turns, { recursive: true, mode: 0o700 });
    const final = path.join(turns, nameOf(advancementKey));
    const temporary = path.join(turns, `.${randomUUID()}.tmp`);
    await writeSynced(temporary, JSON.stringify({ advancementKey, ...record }));
    try {
      await link(temporary, final);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      return "duplicate";
    } finally {
      await unlink(temporary);
    }
    await syncFolder(turns);
    await this.prune(turns);
    return "committed";
  }

  async follow(successor: string, predecessor: string): Promise<void> {
    const folder = path.join(this.folder, "successors");
    await mkdir(folder, { recursive: true, mode: 0o700 });
    const temporary = path.join(folder, `.${randomUUID()}.tmp`);
    await writeSynced(temporary, JSON.stringify({ successor, predecessor }));
    await rename(temporary, path.join(folder, nameOf(successor)));
    await syncFolder(folder);
  }

  // The sessions `session` continues, oldest first.
  async predecessors(session: string): Promise<string[]> {
    const found: string[] = [];
    let current = session;
    while (found.length < MOST_PREDECESSORS) {
      let text: string;
      try {
        text = await readFile(path.join(this.folder, "successors", nameOf(current)), "utf8");
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") break;
        throw error;
      }
      const { predecessor } = JSON.parse(text) as { predecessor?: unknown };
      if (typeof predecessor !== "string" || predecessor === session || found.includes(predecessor)) break;
      found.unshift(predecessor);
      current = predecessor;
    }
    return found;
  }

  private async prune(turns: string): Promise<void> {
    const now = Date.now();
    if (now - this.prunedAt < PRUNE_EVERY_MS) return;
    this.prunedAt = now;
    for (const name of await readdir(turns)) {
      const file = path.join(turns, name);
      const { mtimeMs } = await stat(file).catch(() => ({ mtimeMs: now }));
      if (now - mtimeMs > RETENTION_MS) await unlink(file).catch(() => undefined);
    }
  }
}
