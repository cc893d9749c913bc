import { type ChildProcess, spawn } from "node:child_process";
import { randomInt } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import autocannon from "autocannon";
import { scopes } from "../src/consent/scopes.ts";

/** The repository root. */
export const root = path.resolve(import.meta.dirname, "..");

/** Prints one JSON line: the figure, its unit and, where there is one, the bar it is measured against. */
export function report(figure: Record<string, unknown>): void {
  console.log(JSON.stringify(figure));
}

/** A service started for a benchmark, in its own process, on its own embedded PostgreSQL (or DATABASE_URL). */
export interface BenchService {
  child: ChildProcess;
  partnerUrl: string;
  internalUrl: string;
  internalToken: string;
  stop(): Promise<void>;
  peakRssMb(): Promise<number>;
}

/** Starts `node src/main.ts` with generous rate limits (and limits on expensive work) unless told otherwise. */
export async function startService(
  env: Record<string, string> = {},
  /** Another checkout of the service to run (a baseline to compare with), the repository's own by default. */
  cwd = root,
): Promise<BenchService> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-bench-"));
  await fs.chmod(dataDir, 0o755);
  const child = spawn(process.execPath, ["src/main.ts"], {
    cwd,
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      PORT: "0",
      INTERNAL_PORT: "0",
      HOST: "127.0.0.1",
      LOG_LEVEL: "info",
      RATE_LIMIT_READ: "100000000:100000000",
      RATE_LIMIT_WRITE: "100000000:100000000",
      SNAPSHOT_CONCURRENCY_PER_KEY: "100000",
      // The benchmarks' receivers listen on loopback.
      ALLOW_LOCAL_WEBHOOKS: "true",
      DISBURSEMENTS_PER_USER_PER_DAY: "1000000",
      ...env,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const urls = await new Promise<{ partner: string; internal: string }>((resolve, reject) => {
    // "started" is logged by every role, with the listener addresses when the role has listeners.
    child.on("exit", (code) => reject(new Error(`service exited with ${code}`)));
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      if (!line.startsWith("{")) return;
      const entry = JSON.parse(line);
      if (entry.msg === "started") resolve(entry);
      else if (entry.level === "error") process.stderr.write(`${line}\n`);
    });
  });
  const internalToken =
    env.INTERNAL_TOKEN ?? (await fs.readFile(path.join(dataDir, "internal-token"), "utf8")).trim();
  return {
    child,
    partnerUrl: urls.partner,
    internalUrl: urls.internal,
    internalToken,
    async peakRssMb() {
      const status = await fs.readFile(`/proc/${child.pid}/status`, "utf8");
      return Math.round(Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
    },
    async stop() {
      const exited = new Promise((r) => child.on("exit", r));
      child.kill("SIGTERM");
      await exited;
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Calls an internal API method with the Connect JSON protocol. */
export async function internalCall(s: BenchService, method: string, body: unknown): Promise<any> {
  const res = await fetch(`${s.internalUrl}/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${s.internalToken}` },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** A partner with a sandbox key. */
export async function partnerWithKey(s: BenchService): Promise<{ partnerId: string; key: string }> {
  const { partner } = await internalCall(s, "internal.v1.PartnerService/CreatePartner", {
    name: "Bench Lender",
    feeRateBps: 100,
  });
  const { key } = await internalCall(s, "internal.v1.ApiKeyService/IssueApiKey", {
    partnerId: partner.id,
    environment: "sandbox",
  });
  return { partnerId: partner.id, key };
}

/** Load figures from autocannon. */
export interface Load {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
}

/** Runs autocannon against a URL (a short warm-up first) and returns throughput and latency. */
export async function load(
  url: string,
  options: { connections: number; seconds: number; headers?: Record<string, string>; overallRate?: number },
): Promise<Load> {
  const run = (duration: number) =>
    autocannon({
      url,
      connections: options.connections,
      duration,
      headers: options.headers,
      overallRate: options.overallRate,
    });
  await run(2);
  const r = await run(options.seconds);
  return {
    requestsPerSecond: Math.round(r.requests.average),
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
  };
}

/**
 * Open-loop load at a fixed rate: one request every 1/rate seconds, whatever the previous ones are doing
 * (autocannon's `overallRate` releases each second's quota in bursts, which measures its own queueing).
 * Returns latency percentiles of the responses, and how many got each status (with the error's `code` for
 * non-2xx answers, such as `429 rate_limited`).
 */
export async function paced(
  base: string | string[],
  nextPath: () => string,
  options: {
    rate: number;
    seconds: number;
    headers?: Record<string, string>;
    method?: string;
    body?: (i: number) => { body: string; headers: Record<string, string> };
  },
): Promise<{
  sent: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
  statuses: Record<string, number>;
}> {
  const http = await import("node:http");
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  // Several instances: requests go to each in turn.
  const urls = (Array.isArray(base) ? base : [base]).map((b) => new URL(b));
  const latencies: number[] = [];
  let non2xx = 0;
  let errors = 0;
  const statuses: Record<string, number> = {};
  const tally = (status: string) => {
    statuses[status] = (statuses[status] ?? 0) + 1;
  };
  const inflight: Promise<void>[] = [];
  const total = options.rate * options.seconds;
  const start = performance.now();
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / options.rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    inflight.push(
      new Promise<void>((resolve) => {
        const t0 = performance.now();
        const url = urls[i % urls.length] as URL;
        const extra = options.body?.(i);
        const req = http.request(
          {
            host: url.hostname,
            port: url.port,
            path: nextPath(),
            method: options.method ?? "GET",
            agent,
            headers: { ...options.headers, ...extra?.headers },
          },
          (res) => {
            const status = res.statusCode ?? 0;
            const chunks: Buffer[] = [];
            // Only an error's body is kept, for its code.
            res.on("data", (c: Buffer) => {
              if (status >= 300) chunks.push(c);
            });
            res.on("end", () => {
              latencies.push(performance.now() - t0);
              if (status >= 300) {
                non2xx++;
                let code = "";
                try {
                  code = JSON.parse(Buffer.concat(chunks).toString()).code ?? "";
                } catch {
                  // not the API's JSON
                }
                tally(`${status}${code ? ` ${code}` : ""}`);
              } else tally(String(status));
              resolve();
            });
          },
        );
        req.on("error", () => {
          errors++;
          resolve();
        });
        req.end(extra?.body);
      }),
    );
  }
  await Promise.all(inflight);
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const pct = (p: number) =>
    Number((latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0).toFixed(2));
  return { sent: total, p50Ms: pct(0.5), p99Ms: pct(0.99), non2xx, errors, statuses };
}

/** Sandbox users `usr_bench0…` with a `standing` consent for the partner, made over the internal API. */
export async function seedConsentedUsers(s: BenchService, partnerId: string, count: number): Promise<void> {
  for (let i = 0; i < count; i += 25) {
    await Promise.all(
      Array.from({ length: Math.min(25, count - i) }, async (_, j) => {
        const id = `usr_bench${i + j}`;
        await internalCall(s, "internal.v1.UserService/UpsertUser", {
          id,
          phoneNumber: `+23470${String(i + j).padStart(8, "0")}`,
          segment: "trader",
          environment: "sandbox",
        });
        await internalCall(s, "internal.v1.ConsentAdminService/GrantConsent", {
          userId: id,
          partnerId,
          scopes: ["standing"],
          ledgerWindowDays: 30,
        });
      }),
    );
  }
}

/**
 * Waits (up to 3 minutes) until `total` of the partner's disbursements are DELIVERED, counting from now;
 * the partner's only, since workers also seed the sandbox fixture users' past loans.
 */
export async function drainPayouts(
  client: { query(text: string, params: unknown[]): Promise<{ rows: { count: string }[] }> },
  partnerId: string,
  total: number,
): Promise<{ delivered: number; seconds: number }> {
  const delivered = async () =>
    Number(
      (
        await client.query(
          "select count(*) from disbursements where status = 'DELIVERED' and partner_id = $1",
          [partnerId],
        )
      ).rows[0]?.count ?? 0,
    );
  const t0 = performance.now();
  let last = await delivered();
  const until = t0 + 180_000;
  while (last < total && performance.now() < until) {
    await new Promise((r) => setTimeout(r, 50));
    last = await delivered();
  }
  return { delivered: last, seconds: (performance.now() - t0) / 1000 };
}

/**
 * The people accept every mandate of a partner still AWAITING_ACCEPTANCE, through the sandbox helper (32 at a
 * time): what starts the payouts a benchmark then measures. Answers how many were accepted.
 */
export async function acceptMandates(
  client: { query(text: string, params: unknown[]): Promise<{ rows: { id: string }[] }> },
  partnerUrl: string,
  partnerId: string,
  key: string,
): Promise<number> {
  const { rows } = await client.query(
    "select id from disbursements where partner_id = $1 and status = 'AWAITING_ACCEPTANCE'",
    [partnerId],
  );
  const queue = rows.map((r) => r.id);
  let accepted = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      for (let id = queue.shift(); id; id = queue.shift()) {
        const res = await fetch(`${partnerUrl}/partner/v1/sandbox/disbursements/${id}/accept`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}` },
        });
        await res.arrayBuffer();
        if (res.status === 200) accepted++;
      }
    }),
  );
  return accepted;
}

/** Prints rows of figures (each with `bench`, `figure`, `bar`, `meets`) as one table, every figure against its bar. */
export function printTable(rows: Record<string, unknown>[]): void {
  const META = new Set(["bench", "figure", "bar", "meets"]);
  const result = (row: Record<string, unknown>) =>
    Object.entries(row)
      .filter(([k, v]) => !META.has(k) && (typeof v === "number" || typeof v === "string"))
      .map(([k, v]) => `${k}=${v}`)
      .join(" ");
  const table = rows.map((r) => [
    String(r.bench ?? ""),
    String(r.figure ?? ""),
    result(r),
    String(r.bar),
    r.meets ? "yes" : "NO",
  ]);
  const header = ["bench", "figure", "result", "bar", "meets"];
  const widths = header.map((h, i) =>
    Math.min(70, Math.max(h.length, ...table.map((r) => (r[i] ?? "").length))),
  );
  const line = (cells: string[]) =>
    cells.map((c, i) => c.slice(0, widths[i]).padEnd(widths[i] ?? 0)).join(" | ");
  console.log(`\n${line(header)}\n${widths.map((w) => "-".repeat(w)).join("-|-")}`);
  for (const r of table) console.log(line(r));
}

/**
 * A bare node:http server in its own process (like the service) answering every request with `body` and
 * `headers`: the ceiling a benchmark compares the service with.
 */
export async function startBareServer(
  body: string,
  headers: Record<string, string>,
): Promise<{ url: string; stop(): void }> {
  const source = `
    const http = require("node:http");
    const body = Buffer.from(${JSON.stringify(body)});
    const headers = { ...${JSON.stringify(headers)}, "content-length": body.length };
    http.createServer((req, res) => {
      res.writeHead(200, headers);
      res.end(body);
    }).listen(0, "127.0.0.1", function () { console.log(this.address().port); });`;
  const child = spawn(process.execPath, ["-e", source], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<string>((resolve) =>
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once("line", resolve),
  );
  return { url: `http://127.0.0.1:${port}`, stop: () => child.kill() };
}

/** How many users {@link seedTraders} makes, and how much ledger each has. */
export interface TraderLedgers {
  /** `usr_<prefix><n>`, and `<prefix><u>_<n>` the entries' ids. */
  prefix: string;
  /** Two digits after +234 70…, so two benches' users never share a phone number. */
  phonePrefix: string;
  users: number;
  /** The first `heavy` users have `heavyEntries` entries over 2,000 counterparties; the rest `lightEntries` over 20. */
  heavy: number;
  heavyEntries: number;
  lightEntries: number;
}

/**
 * Sandbox traders with ledgers over the last 400 days, made over the internal API as the platform would: users
 * fifty at a time, then entries in batches of 2,000. Returns the user id of each index.
 */
export async function seedTraders(s: BenchService, o: TraderLedgers): Promise<(i: number) => string> {
  const userId = (i: number) => `usr_${o.prefix}${i}`;
  for (let i = 0; i < o.users; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, o.users - i) }, (_, j) =>
        internalCall(s, "internal.v1.UserService/UpsertUser", {
          id: userId(i + j),
          phoneNumber: `+2347${o.phonePrefix}${String(i + j).padStart(8, "0")}`,
          segment: "trader",
          environment: "sandbox",
        }),
      ),
    );
  }
  let batch: unknown[] = [];
  const flush = async () => {
    if (batch.length)
      await internalCall(s, "internal.v1.IngestService/IngestLedgerEntries", { entries: batch });
    batch = [];
  };
  for (let u = 0; u < o.users; u++) {
    for (let n = 0; n < (u < o.heavy ? o.heavyEntries : o.lightEntries); n++) {
      batch.push({
        id: `${o.prefix}${u}_${n}`,
        userId: userId(u),
        amountKobo: String(randomInt(100, 5_000_000)),
        direction: randomInt(3) === 0 ? "OUTFLOW" : "INFLOW",
        counterpartyId: `cp${randomInt(u < o.heavy ? 2_000 : 20)}`,
        channel: "transfer",
        occurredAt: new Date(Date.now() - randomInt(0, 400 * 86_400_000)).toISOString(),
      });
      if (batch.length === 2_000) await flush();
    }
  }
  await flush();
  return userId;
}

/** Full-scope consents of `partnerId` for the users numbered `readers`, twenty at a time. */
export async function grantReaders(
  s: BenchService,
  partnerId: string,
  userId: (i: number) => string,
  readers: number[],
): Promise<void> {
  for (let i = 0; i < readers.length; i += 20)
    await Promise.all(
      readers.slice(i, i + 20).map((u) =>
        internalCall(s, "internal.v1.ConsentAdminService/GrantConsent", {
          userId: userId(u),
          partnerId,
          scopes: [...scopes],
          ledgerWindowDays: 90,
          maxLedgerWindowDays: 365,
        }),
      ),
    );
}

/** A round of snapshot reads at saturation (50 connections) on `s`, the readers taken in turn. */
export function snapshotRound(
  s: BenchService,
  key: string,
  userId: (i: number) => string,
  readers: number[],
  seconds: number,
) {
  let i = 0;
  return autocannon({
    url: s.partnerUrl,
    connections: 50,
    duration: seconds,
    headers: { authorization: `Bearer ${key}` },
    requests: [
      {
        setupRequest: ((req: Record<string, unknown>) => {
          const u = readers[i++ % readers.length] as number;
          req.path = `/partner/v1/users/${userId(u)}/snapshot?ledger_window_days=${[30, 90, 365][i % 3]}`;
          return req;
        }) as never,
      },
    ],
  });
}
