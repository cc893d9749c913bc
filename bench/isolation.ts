// Benchmark of isolation between partners (issue: per-partner limits on expensive work). Not a test:
// `npm run bench:isolation`. The service in its own process on an embedded PostgreSQL, at the contract's limits.
//   Partner A has a heavy user: BENCH_LOANS (500) delivered loans of 3 installments, some collected (every
//   loan's first, every fifth loan in full, every tenth loan's second failed), and BENCH_HEAVY_ENTRIES (20,000)
//   ledger entries over 400 days. Partner B has an ordinary consented user of its own.
//   B reads its user's snapshot and GET /partner/v1/keys at BENCH_B_RATE (50) req/s each (open loop), first
//   with A idle, then while A reads its heavy user's full-scope 365-day snapshot at BENCH_A_RATE (200) req/s
//   offered (open loop): its read burst (200/s for 5 s), then its refill of 100/s admitted, the rest refused.
// Bar: for each of B's two reads, p99 with A at its limit <= 2 x p99 with A idle.
//
// The loans are made through the partner API (create, the person accepts with the sandbox helper, the payout is
// delivered, repayments collected with the sandbox helper), by a first service process with its limits raised;
// the measurements then run on a second process, on the same database, with the contract's limits. Seeding this
// way keeps the repayment-history roll-ups in the service's own hands (they are maintained when loans and
// installments settle): `seedLoans` below is the one place that makes the heavy user's loans.
import { randomBytes, randomInt } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import { ApiKeyService } from "../gen/internal/v1/api_keys_pb.ts";
import {
  IngestService,
  LedgerEntry_Direction,
  type LedgerEntrySchema,
} from "../gen/internal/v1/ingest_pb.ts";
import { PartnerService } from "../gen/internal/v1/partners_pb.ts";
import { ConsentAdminService, UserService } from "../gen/internal/v1/users_pb.ts";
import { defaultExpensiveLimits, defaultRateLimits } from "../src/config.ts";
import { scopes } from "../src/consent/scopes.ts";
import { startEmbeddedPostgres } from "../src/platform/db/embedded.ts";
import { createLogger } from "../src/platform/logger.ts";
import { acceptMandates, type BenchService, drainPayouts, paced, report, startService } from "./support.ts";

const LOANS = Number(process.env.BENCH_LOANS ?? 500);
const HEAVY_ENTRIES = Number(process.env.BENCH_HEAVY_ENTRIES ?? 20_000);
const LIGHT_ENTRIES = Number(process.env.BENCH_LIGHT_ENTRIES ?? 500);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const B_RATE = Number(process.env.BENCH_B_RATE ?? 50);
const A_RATE = Number(process.env.BENCH_A_RATE ?? 200);

const logger = createLogger({ level: "warn", write: (l) => process.stderr.write(`${l}\n`) });
const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "partner-api-bench-db-"));
await fs.chmod(dataDir, 0o755);
const db = await startEmbeddedPostgres({ dataDir, database: "bench", logger });
const internalToken = randomBytes(24).toString("base64url");
const env = {
  DATABASE_URL: db.url,
  MASTER_KEY: randomBytes(32).toString("hex"),
  INTERNAL_TOKEN: internalToken,
  DB_POOL_SIZE: "16",
};
const client = new pg.Client({ connectionString: db.url });
await client.connect();
let service: BenchService = await startService(env);

const day = (n: number) => new Date(Date.now() + 3_600_000 + n * 86_400_000).toISOString().slice(0, 10);

/** Runs `work` over `items` with `width` calls in flight. */
async function pool<T>(items: T[], width: number, work: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: width }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
    }),
  );
}

/** A partner API call that must succeed. */
async function call(base: string, key: string, method: string, url: string, body?: unknown, idem?: string) {
  const res = await fetch(`${base}${url}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...(idem ? { "idempotency-key": idem } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/**
 * THE ONE PLACE the heavy user's loans are made. Through the partner API, as a partner and the person would:
 * `count` disbursements of 3 installments, each accepted (sandbox helper), paid out by the simulator, then
 * repayments collected or failed with the sandbox helper. Every roll-up the snapshot reads is maintained by the
 * service as these settle. Seeding by SQL instead would have to insert `disbursements` and `installments` rows
 * and then call the service's own roll-up refresh for the user (today `disbursementRepository.refreshHistory`
 * with the partner's sandbox lender scope): here, and nowhere else.
 */
async function seedLoans(s: BenchService, partnerId: string, key: string, userId: string, count: number) {
  const t0 = performance.now();
  await pool(
    Array.from({ length: count }, (_, i) => i),
    32,
    async (i) => {
      await call(
        s.partnerUrl,
        key,
        "POST",
        "/partner/v1/disbursements",
        {
          userId,
          principalKobo: String(1_000_000 + i),
          destination: "WALLET",
          reference: `heavy-${i}`,
          repaymentSchedule: {
            installments: [30, 60, 90].map((n) => ({ dueDate: day(n), amountKobo: "400000" })),
          },
        },
        `heavy-${i}`,
      );
    },
  );
  const accepted = await acceptMandates(client, s.partnerUrl, partnerId, key);
  const paid = await drainPayouts(client, partnerId, count);
  if (accepted !== count || paid.delivered !== count)
    throw new Error(`seeding: ${accepted} accepted, ${paid.delivered} delivered of ${count}`);
  const { rows } = await client.query<{ id: string; loan: number; n: number }>(
    `select i.id, (dense_rank() over (order by d.id))::int - 1 as loan,
            (row_number() over (partition by d.id order by i.due_date))::int as n
       from installments i join disbursements d on d.id = i.disbursement_id
      where d.partner_id = $1 and d.user_id = $2`,
    [partnerId, userId],
  );
  // Every loan's first installment collected; every fifth loan repaid in full; every tenth loan's second failed.
  const collects = rows.flatMap((r) =>
    r.n === 1 || r.loan % 5 === 0
      ? [{ id: r.id, outcome: "SUCCESS" }]
      : r.n === 2 && r.loan % 10 === 1
        ? [{ id: r.id, outcome: "FAILURE" }]
        : [],
  );
  await pool(collects, 16, async (c) => {
    await call(s.partnerUrl, key, "POST", `/partner/v1/sandbox/repayments/${c.id}/collect`, {
      outcome: c.outcome,
    });
  });
  return {
    loans: count,
    installments: rows.length,
    settled: collects.length,
    seconds: (performance.now() - t0) / 1000,
  };
}

try {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${internalToken}`);
    return next(req);
  };
  const transport = createGrpcTransport({ baseUrl: service.internalUrl, interceptors: [auth] });
  const partners = createClient(PartnerService, transport);
  const keys = createClient(ApiKeyService, transport);
  const users = createClient(UserService, transport);
  const consents = createClient(ConsentAdminService, transport);
  const ingest = createClient(IngestService, transport);

  const a = (await partners.createPartner({ name: "Heavy Lender", feeRateBps: 100 })).partner?.id ?? "";
  const b = (await partners.createPartner({ name: "Quiet Lender", feeRateBps: 100 })).partner?.id ?? "";
  const aKey = (await keys.issueApiKey({ partnerId: a, environment: "sandbox" })).key;
  const bKey = (await keys.issueApiKey({ partnerId: b, environment: "sandbox" })).key;
  const heavy = "usr_isolationHeavy";
  const light = "usr_isolationLight";
  for (const [id, partnerId, phone] of [
    [heavy, a, "+2347011110001"],
    [light, b, "+2347011110002"],
  ] as const) {
    await users.upsertUser({ id, phoneNumber: phone, segment: "trader", environment: "sandbox" });
    await consents.grantConsent({
      userId: id,
      partnerId,
      scopes: [...scopes],
      ledgerWindowDays: 90,
      maxLedgerWindowDays: 365,
    });
  }
  await ingest.upsertStanding({
    updates: [heavy, light].map((userId) => ({
      userId,
      tier: "Established",
      score: 600,
      scoreVersion: "v3",
      tenureDays: 300,
      asOf: timestampFromDate(new Date()),
    })),
  });
  await ingest.upsertKyc({
    updates: [heavy, light].map((userId) => ({
      userId,
      level: "FULL",
      bvnVerified: true,
      ninVerified: true,
    })),
  });
  const now = Date.now();
  for (const [userId, count, parties] of [
    [heavy, HEAVY_ENTRIES, 2_000],
    [light, LIGHT_ENTRIES, 50],
  ] as const) {
    for (let n = 0; n < count; n += 2_000) {
      const entries: MessageInitShape<typeof LedgerEntrySchema>[] = Array.from(
        { length: Math.min(2_000, count - n) },
        (_, j) => ({
          id: `${userId}_${n + j}`,
          userId,
          amountKobo: BigInt(randomInt(100, 5_000_000)),
          direction: randomInt(3) === 0 ? LedgerEntry_Direction.OUTFLOW : LedgerEntry_Direction.INFLOW,
          counterpartyId: `cp${randomInt(parties)}`,
          channel: "transfer",
          occurredAt: timestampFromDate(new Date(now - randomInt(0, 400 * 86_400_000))),
        }),
      );
      await ingest.ingestLedgerEntries({ entries });
    }
  }

  const seeded = await seedLoans(service, a, aKey, heavy, LOANS);
  await client.query(
    "vacuum (analyze) ledger_entries, ledger_daily, ledger_counterparties, disbursements, installments",
  );

  // The measured service: the same database, the contract's limits.
  await service.stop();
  service = await startService({
    ...env,
    RATE_LIMIT_READ: `${defaultRateLimits.read.capacity}:${defaultRateLimits.read.refillPerSecond}`,
    RATE_LIMIT_WRITE: `${defaultRateLimits.write.capacity}:${defaultRateLimits.write.refillPerSecond}`,
    SNAPSHOT_CONCURRENCY_PER_KEY: String(defaultExpensiveLimits.snapshotConcurrencyPerKey),
    DISBURSEMENTS_PER_USER_PER_DAY: String(defaultExpensiveLimits.disbursementsPerUserPerDay),
  });
  const base = service.partnerUrl;
  const heavyPath = `/partner/v1/users/${heavy}/snapshot?ledger_window_days=365`;
  const lightPath = `/partner/v1/users/${light}/snapshot?ledger_window_days=90`;
  const heavyDoc = await call(base, aKey, "GET", heavyPath);
  report({
    bench: "isolation",
    target: "partner A's heavy user, made through the partner API",
    ...seeded,
    seconds: Number(seeded.seconds.toFixed(1)),
    snapshotBytes: JSON.stringify(heavyDoc).length,
    repaymentHistory: heavyDoc.repaymentHistory,
    ledgerEntries: heavyDoc.ledgerWindow?.inflow.count + heavyDoc.ledgerWindow?.outflow.count,
  });
  if (heavyDoc.repaymentHistory?.loansTaken !== LOANS)
    throw new Error(`the heavy user's snapshot shows ${heavyDoc.repaymentHistory?.loansTaken} loans`);

  const bHeaders = { authorization: `Bearer ${bKey}` };
  const aHeaders = { authorization: `Bearer ${aKey}` };
  const bReads = (seconds: number) =>
    Promise.all([
      paced(base, () => lightPath, { rate: B_RATE, seconds, headers: bHeaders }),
      paced(base, () => "/partner/v1/keys", { rate: B_RATE, seconds, headers: bHeaders }),
    ]);
  const pause = (s: number) => new Promise((r) => setTimeout(r, s * 1000));

  // Warm-up (plans, caches, connections), then A's bucket is left to fill again.
  await Promise.all([bReads(3), paced(base, () => heavyPath, { rate: 20, seconds: 3, headers: aHeaders })]);
  await pause(6);

  const [idleSnap, idleKeys] = await bReads(SECONDS);
  await pause(6);
  // A starts first and ends last, so B is measured only while A is at its limit.
  const aLoad = paced(base, () => heavyPath, { rate: A_RATE, seconds: SECONDS + 3, headers: aHeaders });
  await pause(1);
  const [loadedSnap, loadedKeys] = await bReads(SECONDS);
  const aDone = await aLoad;

  report({
    bench: "isolation",
    target: `partner A: heavy user's full-scope 365-day snapshot at ${A_RATE} req/s offered (limits: reads ${defaultRateLimits.read.capacity}:${defaultRateLimits.read.refillPerSecond}, ${defaultExpensiveLimits.snapshotConcurrencyPerKey} in flight)`,
    ...aDone,
  });
  for (const [what, idle, loaded] of [
    ["snapshot", idleSnap, loadedSnap],
    ["GET /partner/v1/keys", idleKeys, loadedKeys],
  ] as const) {
    const ratio = loaded.p99Ms / idle.p99Ms;
    report({
      bench: "isolation",
      figure: `partner B ${what} p99 at ${B_RATE} req/s: A idle vs A at its full read limit`,
      idleP50Ms: idle.p50Ms,
      idleP99Ms: idle.p99Ms,
      loadedP50Ms: loaded.p50Ms,
      loadedP99Ms: loaded.p99Ms,
      ratio: Number(ratio.toFixed(2)),
      non2xx: idle.non2xx + loaded.non2xx,
      bar: "loaded p99 <= 2 x idle p99",
      meets: ratio <= 2 && idle.non2xx + loaded.non2xx === 0 && idle.errors + loaded.errors === 0,
    });
  }
  report({ bench: "isolation", target: "the measured service", peakRssMb: await service.peakRssMb() });
} finally {
  await service.stop();
  await client.end();
  await db.stop();
  await fs.rm(dataDir, { recursive: true, force: true });
}
