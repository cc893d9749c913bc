// Benchmark of webhook fairness (issue: fair webhook delivery). Not a test: run with `npm run bench:fairness`.
// The service runs in its own process (API and worker) on an embedded PostgreSQL. Partner A has BENCH_BACKLOG
// (1,000) deliveries queued to an endpoint that answers after BENCH_SLOW_MS (25 s); once that endpoint is
// saturated, partner B raises 20 events a second for BENCH_SECONDS (10) to an endpoint that answers at once.
// Figure: partner B's event-to-first-attempt latency (commit of the raising transaction to arrival at its
// receiver), p50 and p99. Bar: p99 <= 1 s. Also reported: the most attempts partner A's endpoint had at once
// (bounded by WEBHOOK_MAX_IN_FLIGHT_PER_DESTINATION, 8) and how many of its deliveries were still waiting.
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { PgBoss } from "pg-boss";
import { schema } from "../src/entities.ts";
import { systemClock } from "../src/platform/clock.ts";
import { startEmbeddedPostgres } from "../src/platform/db/embedded.ts";
import { createOrm } from "../src/platform/db/orm.ts";
import { BOSS_SCHEMA } from "../src/platform/jobs/boss.ts";
import { createJobs } from "../src/platform/jobs/jobs.ts";
import { createLogger } from "../src/platform/logger.ts";
import { createOutbox } from "../src/webhooks/outbox.service.ts";
import { internalCall, report, startService } from "./support.ts";

const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const backlog = Number(process.env.BENCH_BACKLOG ?? 1_000);
const slowMs = Number(process.env.BENCH_SLOW_MS ?? 25_000);
const rate = 20;

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;

const logger = createLogger({ level: "warn", write: (l) => process.stderr.write(`${l}\n`) });
const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-bench-db-"));
await fs.chmod(dataDir, 0o755);
const db = await startEmbeddedPostgres({ dataDir, database: "bench", logger });
const internalToken = randomBytes(24).toString("base64url");
const service = await startService({
  DATABASE_URL: db.url,
  MASTER_KEY: randomBytes(32).toString("hex"),
  INTERNAL_TOKEN: internalToken,
  ALLOW_LOCAL_WEBHOOKS: "true",
  DB_POOL_SIZE: "20",
});

/** A receiver on loopback that answers after `delayMs` and notes when each event arrived. */
async function receiver(delayMs: number) {
  const arrivals = new Map<string, number>();
  let open = 0;
  let peakOpen = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      arrivals.set(req.headers["x-service-event-id"] as string, performance.now());
      open++;
      peakOpen = Math.max(peakOpen, open);
      res.on("close", () => open--);
      if (delayMs === 0) res.writeHead(200).end();
      else setTimeout(() => res.destroyed || res.writeHead(200).end(), delayMs).unref();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hooks`,
    arrivals,
    peak: () => peakOpen,
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}

const slow = await receiver(slowMs);
const fast = await receiver(0);
const client = new pg.Client({ connectionString: db.url });
await client.connect();

try {
  const partners = [];
  for (const [name, url] of [
    ["Slow endpoint", slow.url],
    ["Bench B", fast.url],
  ] as const) {
    const { partner } = await internalCall(service, "internal.v1.PartnerService/CreatePartner", {
      name,
      feeRateBps: 100,
    });
    const { key } = await internalCall(service, "internal.v1.ApiKeyService/IssueApiKey", {
      partnerId: partner.id,
      environment: "sandbox",
    });
    const res = await fetch(`${service.partnerUrl}/partner/v1/webhooks`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ url, events: ["consent.*"] }),
    });
    if (res.status !== 200) throw new Error(`create webhook: ${res.status} ${await res.text()}`);
    partners.push(partner.id as string);
  }
  const [a, b] = partners as [string, string];

  // This process raises events exactly as the service's own features do: outbox.raise in a transaction.
  const orm = await createOrm({ databaseUrl: db.url, schema, poolSize: 8, logger });
  const boss = new PgBoss({
    connectionString: db.url,
    schema: BOSS_SCHEMA,
    supervise: false,
    schedule: false,
    migrate: false,
  });
  await boss.start();
  const outbox = createOutbox({ jobs: createJobs({ boss, orm }), clock: systemClock });
  const raise = async (partnerId: string) => {
    const raised = await orm.em.fork().transactional((tx) =>
      outbox.raise(tx, {
        partnerId,
        environment: "sandbox",
        type: "consent.granted",
        payload: { bench: true },
      }),
    );
    return { id: raised.eventId as string, at: performance.now() };
  };

  // Partner A's backlog, then its endpoint saturated.
  for (let i = 0; i < backlog; i += 50) {
    await Promise.all(Array.from({ length: Math.min(50, backlog - i) }, () => raise(a)));
  }
  const until = performance.now() + 30_000;
  while (slow.arrivals.size === 0 && performance.now() < until) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 500));

  // Partner B at a steady rate.
  const committed: { id: string; at: number }[] = [];
  const started = performance.now();
  const inflight: Promise<void>[] = [];
  for (let i = 0; i < rate * seconds; i++) {
    const wait = started + (i * 1000) / rate - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    inflight.push(raise(b).then((c) => void committed.push(c)));
  }
  await Promise.all(inflight);
  const deadline = performance.now() + 30_000;
  while (committed.some((c) => !fast.arrivals.has(c.id)) && performance.now() < deadline)
    await new Promise((r) => setTimeout(r, 20));
  const latencies = committed
    .map((c) => (fast.arrivals.get(c.id) ?? Number.POSITIVE_INFINITY) - c.at)
    .sort((x, y) => x - y);
  const p50 = percentile(latencies, 0.5);
  const p99 = percentile(latencies, 0.99);
  const waiting = Number(
    (
      await client.query(
        "select count(*) from webhook_deliveries where partner_id = $1 and status in ('PENDING', 'FAILED')",
        [a],
      )
    ).rows[0]?.count ?? 0,
  );
  report({
    bench: "fairness",
    figure: `partner B event-to-first-attempt while partner A has ${backlog} deliveries queued to an endpoint answering after ${slowMs / 1000} s`,
    deliveries: latencies.filter(Number.isFinite).length,
    expected: rate * seconds,
    p50Ms: Number(p50.toFixed(1)),
    p99Ms: Number(p99.toFixed(1)),
    slowEndpointPeakInFlight: slow.peak(),
    partnerAWaiting: waiting,
    bar: "p99 <= 1000 ms",
    meets: p99 <= 1_000 && latencies.every(Number.isFinite),
  });
  await boss.stop({ graceful: false, close: true });
  await orm.close();
} finally {
  await client.end();
  slow.close();
  fast.close();
  await service.stop();
  await db.stop();
  await fs.rm(dataDir, { recursive: true, force: true });
}
