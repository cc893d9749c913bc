// Benchmark of disbursements (issue: disbursements). Not a test: `npm run bench:disbursements`.
// Against the sandbox simulator, service in its own process on an embedded PostgreSQL:
//   1. creates at a steady 100 req/s (open loop), each with its own Idempotency-Key: p50/p99;
//      bar: p99 <= 30 ms;
//   2. a backlog of BENCH_BACKLOG creates, every mandate accepted (sandbox helper), then payouts delivered
//      per second until all are DELIVERED;
//      bar: >= 300 payouts/s.
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { startEmbeddedPostgres } from "../src/platform/db/embedded.ts";
import { createLogger } from "../src/platform/logger.ts";
import {
  acceptMandates,
  drainPayouts,
  internalCall,
  report,
  seedConsentedUsers,
  startService,
} from "./support.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 3_000);
const USERS = 500;

const logger = createLogger({ level: "warn", write: (l) => process.stderr.write(`${l}\n`) });
const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-bench-db-"));
await fs.chmod(dataDir, 0o755);
const db = await startEmbeddedPostgres({ dataDir, database: "bench", logger });
const internalToken = randomBytes(24).toString("base64url");
const shared = {
  DATABASE_URL: db.url,
  MASTER_KEY: randomBytes(32).toString("hex"),
  INTERNAL_TOKEN: internalToken,
  DB_POOL_SIZE: "20",
};
// The API alone first; a worker joins later, so the payout rate is measured on a backlog it drains.
const service = await startService({ ...shared, ROLE: "api" });
const client = new pg.Client({ connectionString: db.url });
await client.connect();

try {
  const { partner } = await internalCall(service, "internal.v1.PartnerService/CreatePartner", {
    name: "Bench",
    feeRateBps: 150,
  });
  const { key } = await internalCall(service, "internal.v1.ApiKeyService/IssueApiKey", {
    partnerId: partner.id,
    environment: "sandbox",
  });
  await seedConsentedUsers(service, partner.id, USERS);
  const due = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const url = new URL(service.partnerUrl);
  let n = 0;
  const createOne = () =>
    new Promise<{ ms: number; status: number }>((resolve) => {
      const i = n++;
      const body = JSON.stringify({
        userId: `usr_bench${i % USERS}`,
        principalKobo: String(100_000 + i),
        destination: "WALLET",
        reference: `bench-${i}`,
        repaymentSchedule: { installments: [{ dueDate: due, amountKobo: String(120_000 + i) }] },
      });
      const t0 = performance.now();
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: "/partner/v1/disbursements",
          method: "POST",
          agent,
          headers: {
            authorization: `Bearer ${key}`,
            "content-type": "application/json",
            "idempotency-key": `bench-${i}`,
            "content-length": Buffer.byteLength(body),
          },
        },
        (res) => {
          res.resume();
          res.on("end", () => resolve({ ms: performance.now() - t0, status: res.statusCode ?? 0 }));
        },
      );
      req.on("error", () => resolve({ ms: performance.now() - t0, status: 0 }));
      req.end(body);
    });

  // 1. Creates at 100 req/s, open loop (no worker yet: payouts queue up).
  const results: Promise<{ ms: number; status: number }>[] = [];
  const start = performance.now();
  for (let i = 0; i < 100 * SECONDS; i++) {
    const wait = start + i * 10 - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    results.push(createOne());
  }
  const done = await Promise.all(results);
  const ms = done.map((d) => d.ms).sort((a, b) => a - b);
  const pct = (p: number) => Number((ms[Math.min(ms.length - 1, Math.floor(p * ms.length))] ?? 0).toFixed(2));
  const failed = done.filter((d) => d.status !== 200).length;
  report({
    bench: "disbursements",
    figure: "create latency at 100 req/s (open loop, distinct idempotency keys)",
    requests: done.length,
    non200: failed,
    p50Ms: pct(0.5),
    p99Ms: pct(0.99),
    bar: "p99 <= 30 ms",
    meets: pct(0.99) <= 30 && failed === 0,
  });

  // 2. A backlog on top, then a worker: payouts delivered per second while it drains.
  for (let i = 0; i < BACKLOG; i += 40)
    await Promise.all(Array.from({ length: Math.min(40, BACKLOG - i) }, createOne));
  const total = done.length + BACKLOG;
  // The people accept the mandates (only an accepted one is paid out); then the worker drains them.
  const accepted = await acceptMandates(client, service.partnerUrl, partner.id, key);
  if (accepted !== total) throw new Error(`only ${accepted} of ${total} mandates were accepted`);
  const worker = await startService({ ...shared, ROLE: "worker" });
  const { delivered: last, seconds } = await drainPayouts(client, partner.id, total);
  const rate = last / seconds;
  report({
    bench: "disbursements",
    figure: "payouts delivered per second (sandbox simulator, one worker process draining a backlog)",
    backlog: total,
    delivered: last,
    seconds: Number(seconds.toFixed(1)),
    perSecond: Math.round(rate),
    bar: ">= 300",
    meets: rate >= 300 && last === total,
    peakRssMb: await worker.peakRssMb(),
  });
  await worker.stop();
  agent.destroy();
} finally {
  await client.end();
  await service.stop();
  await db.stop();
  await fs.rm(dataDir, { recursive: true, force: true });
}
