// Benchmark of snapshot reads and ledger ingest (issue: snapshots). Not a test: `npm run bench:snapshot`.
// Generates BENCH_USERS users (default 10,000) with ledgers over 400 days: BENCH_HEAVY heavy traders (100)
// with BENCH_HEAVY_ENTRIES entries each (50,000), the others BENCH_LIGHT_ENTRIES each (50): 5.5 M entries,
// ingested over the internal gRPC API. Then full-scope snapshot reads over REST with mixed windows
// (30, 90, 365 days; heavy traders included): p50/p99 at 200 req/s, and saturation throughput.
// Bars: ingest >= 20,000 entries/s; p50 <= 5 ms and p99 <= 25 ms at 200 req/s; >= 1,500 req/s saturation.
// Reads are measured after `VACUUM (ANALYZE)` of the database, as after any bulk load (the ledger, then the
// readers' consents, standing and KYC): without it they run beside autovacuum's pass over 5.5 M new rows,
// which takes a core for a minute or more on 2 cores (saturation then measured 1,050-1,150 req/s here; after
// it, 1,800-2,200), and after a `CHECKPOINT`: the
// checkpoint that follows a bulk load writes its gigabytes while the reads run otherwise, and every read or
// commit that touches the disk queues behind it (p99 118-132 ms at 200 req/s; after it, 17 ms). And after a
// warm-up that reads every path once: a reader's first read after the load fetches its pages from disk (a heavy
// trader's, 10-40 ms here), which is a cold cache, not the steady state the bars are about.
// BENCH_INSTANCES=2 (bench:scaleout): that many service processes on the one database, ingest spread over
// them, reads alternating between them, saturation with the connections split between them.
import { randomBytes, randomInt } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import autocannon from "autocannon";
import pg from "pg";
import { ApiKeyService } from "../gen/internal/v1/api_keys_pb.ts";
import {
  IngestService,
  LedgerEntry_Direction,
  type LedgerEntrySchema,
} from "../gen/internal/v1/ingest_pb.ts";
import { PartnerService } from "../gen/internal/v1/partners_pb.ts";
import { ConsentAdminService, UserService } from "../gen/internal/v1/users_pb.ts";
import { defaultPoolSize } from "../src/config.ts";
import { scopes } from "../src/consent/scopes.ts";
import { startEmbeddedPostgres } from "../src/platform/db/embedded.ts";
import { createLogger } from "../src/platform/logger.ts";
import { paced, report, startService } from "./support.ts";

const USERS = Number(process.env.BENCH_USERS ?? 10_000);
const HEAVY = Number(process.env.BENCH_HEAVY ?? 100);
const HEAVY_ENTRIES = Number(process.env.BENCH_HEAVY_ENTRIES ?? 50_000);
const LIGHT_ENTRIES = Number(process.env.BENCH_LIGHT_ENTRIES ?? 50);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const READ_USERS = Number(process.env.BENCH_READ_USERS ?? 1_000);
const INSTANCES = Number(process.env.BENCH_INSTANCES ?? 1);
const bench = INSTANCES > 1 ? "scaleout" : "snapshot";
const label = INSTANCES > 1 ? ` (${INSTANCES} api instances)` : "";

const logger = createLogger({ level: "warn", write: (l) => process.stderr.write(`${l}\n`) });
const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-bench-db-"));
await fs.chmod(dataDir, 0o755);
const db = await startEmbeddedPostgres({ dataDir, database: "bench", logger });
const internalToken = randomBytes(24).toString("base64url");
const env = {
  DATABASE_URL: db.url,
  MASTER_KEY: randomBytes(32).toString("hex"),
  INTERNAL_TOKEN: internalToken,
  // The database is on this machine: the pool the service sizes for its embedded PostgreSQL (twice the cores plus
  // one, docs/operations.md), shared out between the instances.
  DB_POOL_SIZE: String(Math.max(2, Math.ceil(defaultPoolSize(true) / INSTANCES))),
};
const service = await startService(env);
const services = [service];
for (let n = 1; n < INSTANCES; n++) services.push(await startService({ ...env, ROLE: "api" }));

try {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${internalToken}`);
    return next(req);
  };
  const transport = createGrpcTransport({ baseUrl: service.internalUrl, interceptors: [auth] });
  const users = createClient(UserService, transport);
  const ingest = createClient(IngestService, transport);
  const ingests = [
    ingest,
    ...services
      .slice(1)
      .map((s) =>
        createClient(IngestService, createGrpcTransport({ baseUrl: s.internalUrl, interceptors: [auth] })),
      ),
  ];
  const consents = createClient(ConsentAdminService, transport);
  const { partner } = await createClient(PartnerService, transport).createPartner({
    name: "Bench",
    feeRateBps: 100,
  });
  const { key } = await createClient(ApiKeyService, transport).issueApiKey({
    partnerId: partner?.id ?? "",
    environment: "sandbox",
  });

  const userId = (i: number) => `usr_bench${i}`;
  for (let i = 0; i < USERS; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, USERS - i) }, (_, j) =>
        users.upsertUser({
          id: userId(i + j),
          phoneNumber: `+23470${String(i + j).padStart(8, "0")}`,
          segment: i + j < HEAVY ? "trader" : (["salaried", "gig", "trader", "other"][(i + j) % 4] as string),
          environment: "sandbox",
        }),
      ),
    );
  }

  // Ledger: generated in batches of 2,000, four calls in flight.
  const now = Date.now();
  const day = 86_400_000;
  function* batches() {
    let batch: MessageInitShape<typeof LedgerEntrySchema>[] = [];
    for (let u = 0; u < USERS; u++) {
      const count = u < HEAVY ? HEAVY_ENTRIES : LIGHT_ENTRIES;
      const parties = u < HEAVY ? 2_000 : 20;
      for (let n = 0; n < count; n++) {
        batch.push({
          id: `e${u}_${n}`,
          userId: userId(u),
          amountKobo: BigInt(randomInt(100, 5_000_000)),
          direction: randomInt(3) === 0 ? LedgerEntry_Direction.OUTFLOW : LedgerEntry_Direction.INFLOW,
          counterpartyId: `cp${randomInt(parties)}`,
          channel: "transfer",
          occurredAt: timestampFromDate(new Date(now - randomInt(0, 400 * day))),
        });
        if (batch.length === 2_000) {
          yield batch;
          batch = [];
        }
      }
    }
    if (batch.length) yield batch;
  }
  const source = batches();
  let ingested = 0;
  const ingestStart = performance.now();
  await Promise.all(
    Array.from({ length: 4 }, async (_, k) => {
      const client = ingests[k % ingests.length] ?? ingest;
      for (let next = source.next(); !next.done; next = source.next()) {
        const res = await client.ingestLedgerEntries({ entries: next.value });
        ingested += res.inserted;
      }
    }),
  );
  const ingestSeconds = (performance.now() - ingestStart) / 1000;
  report({
    bench,
    figure: `ingest entries per second over the internal gRPC API${label}`,
    entries: ingested,
    seconds: Number(ingestSeconds.toFixed(1)),
    entriesPerSecond: Math.round(ingested / ingestSeconds),
    bar: ">= 20000",
    meets: ingested / ingestSeconds >= 20_000,
  });

  // Full-scope consents for every heavy trader and a sample of the others; standing and KYC for all of them.
  const readers = [
    ...new Set([
      ...Array.from({ length: HEAVY }, (_, i) => i),
      ...Array.from({ length: READ_USERS }, () => randomInt(HEAVY, USERS)),
    ]),
  ];
  for (let i = 0; i < readers.length; i += 20) {
    await Promise.all(
      readers.slice(i, i + 20).map((u) =>
        consents.grantConsent({
          userId: userId(u),
          partnerId: partner?.id ?? "",
          scopes: [...scopes],
          ledgerWindowDays: 90,
          maxLedgerWindowDays: 365,
        }),
      ),
    );
  }
  for (let i = 0; i < readers.length; i += 500) {
    const slice = readers.slice(i, i + 500);
    await ingest.upsertStanding({
      updates: slice.map((u) => ({
        userId: userId(u),
        tier: "Established",
        score: 600,
        scoreVersion: "v3",
        tenureDays: 300,
        asOf: timestampFromDate(new Date()),
      })),
    });
    await ingest.upsertKyc({
      updates: slice.map((u) => ({
        userId: userId(u),
        level: "FULL",
        bvnVerified: true,
        ninVerified: true,
        phoneVerified: true,
      })),
    });
  }

  // After every bulk write (the ledger, then the consents, standing and KYC of the readers): otherwise autovacuum
  // takes these tables in turn while the reads are measured.
  const vacuum = new pg.Client({ connectionString: db.url });
  await vacuum.connect();
  await vacuum.query("vacuum (analyze)");
  await vacuum.query("checkpoint");
  await vacuum.end();

  const windows = [30, 90, 365];
  const paths = readers.flatMap((u) =>
    windows.map((w) => `/partner/v1/users/${userId(u)}/snapshot?ledger_window_days=${w}`),
  );
  let i = 0;
  const run = (url: string, opts: { connections: number; duration?: number; amount?: number }) =>
    autocannon({
      url,
      ...opts,
      headers: { authorization: `Bearer ${key}` },
      requests: [
        {
          setupRequest: ((req: Record<string, unknown>) => {
            req.path = paths[i++ % paths.length];
            return req;
          }) as never,
        },
      ],
    });
  // Warm-up: every path read once, so the measured reads are the steady state, not each reader's first read
  // after the bulk load (its pages fetched from disk into PostgreSQL's buffers: 10-40 ms each here).
  for (const s of services) await run(s.partnerUrl, { connections: 10, amount: paths.length });
  const urls = services.map((s) => s.partnerUrl);
  const steady = await paced(urls, () => paths[i++ % paths.length] as string, {
    rate: 200,
    seconds: SECONDS,
    headers: { authorization: `Bearer ${key}` },
  });
  report({
    bench,
    figure: `full-scope snapshot latency at 200 req/s (open loop), windows 30/90/365, heavy traders included${label}`,
    requests: steady.sent,
    p50Ms: steady.p50Ms,
    p99Ms: steady.p99Ms,
    non2xx: steady.non2xx,
    bar: "p50 <= 5 ms, p99 <= 25 ms",
    meets: steady.p50Ms <= 5 && steady.p99Ms <= 25 && steady.non2xx === 0 && steady.errors === 0,
  });
  // 50 connections in all, split between the instances.
  const saturated = await Promise.all(
    urls.map((u) => run(u, { connections: Math.ceil(50 / urls.length), duration: SECONDS })),
  );
  const perSecond = saturated.reduce((sum, r) => sum + r.requests.average, 0);
  const non2xx = saturated.reduce((sum, r) => sum + r.non2xx, 0);
  report({
    bench,
    figure: `saturation throughput (50 connections)${label}`,
    requestsPerSecond: Math.round(perSecond),
    p50Ms: Math.max(...saturated.map((r) => r.latency.p50)),
    p99Ms: Math.max(...saturated.map((r) => r.latency.p99)),
    non2xx,
    bar: ">= 1500 req/s",
    meets: perSecond >= 1_500 && non2xx === 0,
    peakRssMb: Math.max(...(await Promise.all(services.map((s) => s.peakRssMb())))),
  });
} finally {
  for (const s of services.reverse()) await s.stop();
  await db.stop();
  await fs.rm(dataDir, { recursive: true, force: true });
}
