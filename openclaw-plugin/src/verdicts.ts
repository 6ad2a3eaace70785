// The question to `session-stream verdicts` (stream/consumers/verdicts/server.py): which entries
// of a session were dropped, and was the transcript processed up to an entry. Loopback HTTP
// with a keep-alive connection and the token from the service's token file.

import { readFile } from "node:fs/promises";
import http from "node:http";

export type Verdicts = {
  processed: boolean;
  dropped: Map<string, string>; // copy entry id -> the kept entry it repeats
  reason: string | null;
};

export class VerdictsUnavailable extends Error {}

export class VerdictClient {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  private token: string | undefined;

  constructor(private readonly url: string, private readonly tokenFile: string) {}

  async ask(session: string, through: string, predecessors: string[], signal: AbortSignal): Promise<Verdicts> {
    const pairs: [string, string][] = [["session", session], ["through", through], ...predecessors.map((p): [string, string] => ["predecessor", p])];
    const query = new URLSearchParams(pairs);
    let answer = await this.get(`/v1/verdicts?${query}`, await this.currentToken(false), signal);
    if (answer.status === 401) answer = await this.get(`/v1/verdicts?${query}`, await this.currentToken(true), signal);
    if (answer.status !== 200) throw new VerdictsUnavailable(`the verdict service answered ${answer.status}`);
    const body = JSON.parse(answer.body) as { processed?: unknown; dropped?: unknown; reason?: unknown };
    if (typeof body.processed !== "boolean" || typeof body.dropped !== "object" || body.dropped === null) {
      throw new VerdictsUnavailable("the verdict service answered something else than verdicts");
    }
    const dropped = new Map<string, string>();
    for (const [copy, repeats] of Object.entries(body.dropped)) if (typeof repeats === "string") dropped.set(copy, repeats);
    return { processed: body.processed, dropped, reason: typeof body.reason === "string" ? body.reason : null };
  }

  // Opens the connection now (a health request), so that the first turn's question does not
  // pay for it; a service that is not there yet costs nothing more.
  warm(): void {
    const timeout = AbortSignal.timeout(2000);
    this.currentToken(false).then((token) => this.get("/v1/health", token, timeout)).catch(() => undefined);
  }

  close(): void {
    this.agent.destroy();
  }

  // Read once, and again when the service refuses it (the file was replaced).
  private async currentToken(again: boolean): Promise<string> {
    if (this.token === undefined || again) {
      try {
        this.token = (await readFile(this.tokenFile, "utf8")).trim();
      } catch (error) {
        throw new VerdictsUnavailable(`cannot read the token file ${this.tokenFile}: ${(error as Error).message}`);
      }
    }
    return this.token;
  }

  private get(path: string, token: string, signal: AbortSignal): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const request = http.get(new URL(path, this.url), { agent: this.agent, headers: { authorization: `Bearer ${token}` }, signal }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
        response.on("error", reject);
      });
      request.on("error", reject);
    });
  }
}
