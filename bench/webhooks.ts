// Benchmark of webhook delivery (issue: webhooks). Not a test: run with `npm run bench:webhooks`.
// The service runs in its own process (API and worker) on an embedded PostgreSQL; this process raises
// events through the outbox (as a feature would, in its own transactions) to 10 subscriptions on a local
// receiver that answers 200 at once.
//   1. Latency: 100 events/s (1,000 deliveries/s) for BENCH_SECONDS; event-to-first-attempt p50/p99,
//      measured from the commit of the raising transaction to the request arriving at the receiver.
//      Bar: p50 <= 25 ms, p99 <= 150 ms. The same load runs for BENCH_WARMUP seconds first (2) and is not
//      counted: the first half-second after a start (connections opened to PostgreSQL and the receiver,
//      code not yet optimised) has a tail of its own, above 100 ms with two worker processes on 2 cores.
//   2. Throughput: a backlog of BENCH_BACKLOG events (x10 deliveries) raised at once; deliveries per
//      second from the first to the last arrival. Bar: >= 1,000 deliveries/s.
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
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
const backlog = Number(process.env.BENCH_BACKLOG ?? 2_000);
const warmup = Number(process.env.BENCH_WARMUP ?? 2);
const rate = 100;
const subscriptions = 10;

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;

const logger = createLogger({ level: "warn", write: (l) => process.stderr.write(`${l}\n`) });
const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-bench-db-"));
await fs.chmod(dataDir, 0o755);
const db = await startEmbeddedPostgres({ dataDir, database: "bench", logger });
const masterKey = randomBytes(32).toString("hex");
const internalToken = randomBytes(24).toString("base64url");
const env = {
  DATABASE_URL: db.url,
  MASTER_KEY: masterKey,
  INTERNAL_TOKEN: internalToken,
  ALLOW_LOCAL_WEBHOOKS: "true",
  DB_POOL_SIZE: "20",
};
const service = await startService(env);
// BENCH_INSTANCES=2 (bench:scaleout): more worker processes share the deliveries on the same database.
const instances = Number(process.env.BENCH_INSTANCES ?? 1);
const extraWorkers = [];
for (let i = 1; i < instances; i++) extraWorkers.push(await startService({ ...env, ROLE: "worker" }));
const label = instances > 1 ? ` (${instances} worker processes)` : "";

// The receiver: answers 200 at once and notes when each delivery arrived.
const arrivals = new Map<string, number[]>();
let arrived = 0;
let firstArrival = 0;
let lastArrival = 0;
const receiver = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const now = performance.now();
    const id = req.headers["x-service-event-id"] as string;
    const list = arrivals.get(id) ?? [];
    list.push(now);
    arrivals.set(id, list);
    arrived++;
    firstArrival ||= now;
    lastArrival = now;
    res.writeHead(200).end();
  });
});
receiver.keepAliveTimeout = 60_000;
await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`;

try {
  const { partner } = await internalCall(service, "internal.v1.PartnerService/CreatePartner", {
    name: "Bench",
    feeRateBps: 100,
  });
  const { key } = await internalCall(service, "internal.v1.ApiKeyService/IssueApiKey", {
    partnerId: partner.id,
    environment: "sandbox",
  });
  for (let i = 0; i < subscriptions; i++) {
    const res = await fetch(`${service.partnerUrl}/partner/v1/webhooks`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ url: receiverUrl, events: ["consent.*"] }),
    });
    if (res.status !== 200) throw new Error(`create webhook: ${res.status} ${await res.text()}`);
  }

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
  const committedAt = new Map<string, number>();
  const raise = async () => {
    const raised = await orm.em.fork().transactional((tx) =>
      outbox.raise(tx, {
        partnerId: partner.id,
        environment: "sandbox",
        type: "consent.granted",
        payload: { bench: true },
      }),
    );
    committedAt.set(raised.eventId as string, performance.now());
  };

  // 1. Latency at a steady 100 events/s, after a warm-up at the same rate.
  const steady = async (count: number) => {
    const started = performance.now();
    const inflight: Promise<void>[] = [];
    for (let i = 0; i < count; i++) {
      const due = started + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      inflight.push(raise());
    }
    await Promise.all(inflight);
    const deadline = performance.now() + 30_000;
    while (arrived < count * subscriptions && performance.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
  };
  await steady(rate * warmup);
  committedAt.clear();
  arrivals.clear();
  arrived = 0;
  const total = rate * seconds;
  await steady(total);
  const latencies: number[] = [];
  for (const [id, at] of committedAt) for (const t of arrivals.get(id) ?? []) latencies.push(t - at);
  latencies.sort((a, b) => a - b);
  const p50 = percentile(latencies, 0.5);
  const p99 = percentile(latencies, 0.99);
  report({
    bench: instances > 1 ? "scaleout" : "webhooks",
    figure: `event-to-first-attempt latency at 100 events/s x 10 subscriptions${label}`,
    deliveries: latencies.length,
    expected: total * subscriptions,
    p50Ms: Number(p50.toFixed(1)),
    p99Ms: Number(p99.toFixed(1)),
    bar: "p50 <= 25 ms, p99 <= 150 ms",
    meets: p50 <= 25 && p99 <= 150 && latencies.length === total * subscriptions,
  });

  // 2. Sustained throughput on a backlog.
  arrived = 0;
  firstArrival = 0;
  const target = backlog * subscriptions;
  const raisedAt = performance.now();
  for (let i = 0; i < backlog; i += 50)
    await Promise.all(Array.from({ length: Math.min(50, backlog - i) }, raise));
  const raisedIn = performance.now() - raisedAt;
  const until = performance.now() + 120_000;
  while (arrived < target && performance.now() < until) await new Promise((r) => setTimeout(r, 20));
  const perSecond = (arrived / Math.max(1, lastArrival - firstArrival)) * 1000;
  report({
    bench: instances > 1 ? "scaleout" : "webhooks",
    figure: `sustained deliveries per second (backlog, receiver answering at once)${label}`,
    deliveries: arrived,
    expected: target,
    raiseSeconds: Number((raisedIn / 1000).toFixed(1)),
    deliveriesPerSecond: Math.round(perSecond),
    bar: ">= 1000",
    meets: perSecond >= 1000 && arrived === target,
    peakRssMb: await service.peakRssMb(),
  });
  await boss.stop({ graceful: false, close: true });
  await orm.close();
} finally {
  receiver.closeAllConnections();
  receiver.close();
  for (const w of extraWorkers) await w.stop();
  await service.stop();
  await db.stop();
  await fs.rm(dataDir, { recursive: true, force: true });
}
