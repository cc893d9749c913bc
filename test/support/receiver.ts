import { EventEmitter } from "node:events";
import http from "node:http";

/** One request the receiver got. */
export interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Wall-clock ms when it arrived. */
  at: number;
}

/**
 * How to answer a request: a status (and body), after `delayMs` if given (a slow endpoint), or hold the
 * connection open until released.
 */
export type Answer =
  | { status: number; body?: string; headers?: Record<string, string>; delayMs?: number }
  | "hang";

/** A webhook endpoint on loopback that records what it gets and answers what the test asks. */
export interface TestReceiver {
  url: string;
  received: Received[];
  /** Requests arrived and not yet answered (held or delayed), and the most there have been at once. */
  readonly open: number;
  readonly peakOpen: number;
  /** Sets `peakOpen` back to the current `open`. */
  resetPeak(): void;
  /** The answer for the n-th request (0-based); 200 by default. */
  answer: (req: Received, n: number) => Answer;
  /** Resolves once `count` requests have arrived. */
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>;
  /** Answers every held request with this status. */
  release(status?: number): void;
  close(): Promise<void>;
}

/** Starts a receiver on 127.0.0.1 and a free port. */
export async function startReceiver(
  answer: TestReceiver["answer"] = () => ({ status: 200 }),
): Promise<TestReceiver> {
  const received: Received[] = [];
  const held: http.ServerResponse[] = [];
  const delayed = new Set<NodeJS.Timeout>();
  let open = 0;
  let peakOpen = 0;
  const events = new EventEmitter();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const r: Received = {
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        at: Date.now(),
      };
      const n = received.push(r) - 1;
      open++;
      peakOpen = Math.max(peakOpen, open);
      res.on("close", () => open--);
      events.emit("request");
      const a = receiver.answer(r, n);
      if (a === "hang") {
        held.push(res);
        return;
      }
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(a.status, { "content-type": "text/plain", ...a.headers });
        res.end(a.body ?? "ok");
      };
      if (!a.delayMs) return send();
      const timer = setTimeout(() => {
        delayed.delete(timer);
        send();
      }, a.delayMs);
      delayed.add(timer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  const receiver: TestReceiver = {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    get open() {
      return open;
    },
    get peakOpen() {
      return peakOpen;
    },
    resetPeak() {
      peakOpen = open;
    },
    answer,
    waitFor(count, timeoutMs = 15_000) {
      if (received.length >= count) return Promise.resolve(received.slice());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          events.off("request", check);
          reject(new Error(`receiver got ${received.length} of ${count} requests in ${timeoutMs} ms`));
        }, timeoutMs);
        const check = () => {
          if (received.length < count) return;
          clearTimeout(timer);
          events.off("request", check);
          resolve(received.slice());
        };
        events.on("request", check);
      });
    },
    release(status = 200) {
      for (const res of held.splice(0)) {
        if (!res.destroyed) res.writeHead(status).end("released");
      }
    },
    async close() {
      for (const timer of delayed) clearTimeout(timer);
      delayed.clear();
      receiver.release();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
  return receiver;
}
