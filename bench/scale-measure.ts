// The figures `npm run bench:scale` takes at each size (bench/scale.ts): snapshot reads, list pages, ingest,
// one retention pass, and bytes on disk.
import { randomInt } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import autocannon from "autocannon";
import type pg from "pg";
import { type IngestService, LedgerEntry_Direction } from "../gen/internal/v1/ingest_pb.ts";
import { schema } from "../src/entities.ts";
import { systemClock } from "../src/platform/clock.ts";
import { createOrm } from "../src/platform/db/orm.ts";
import { ensurePartitions } from "../src/platform/db/partitions.ts";
import { createLogger } from "../src/platform/logger.ts";
import { createMetrics } from "../src/platform/metrics.ts";
import { createRetentionService } from "../src/retention/retention.service.ts";
import { ATTEMPTS, DELIVERIES, EVENTS } from "../src/webhooks/webhook-partition.repository.ts";
import { webhookPurges } from "../src/webhooks/webhook-retention.repository.ts";
import { expiredMonth, expiredMonthOf, type Shape, userId } from "./scale-data.ts";
import { paced } from "./support.ts";

/** What every measurement needs. */
export interface Bench {
  pool: pg.Pool;
  databaseUrl: string;
  partnerUrl: string;
  key: string;
  shape: Shape;
  now: number;
  seconds: number;
}

/**
 * Entries/s of `count` new entries over the internal gRPC API: batches of 2,000, four in flight, each batch 200
 * entries of each of 10 users drawn from all of them (bench:snapshot's batches are mostly one heavy trader's).
 */
export async function ingestRate(
  ingest: Client<typeof IngestService>,
  users: number,
  count: number,
  tag: string,
): Promise<{ entries: number; entriesPerSecond: number }> {
  let made = 0;
  let inserted = 0;
  const next = () => {
    if (made >= count) return undefined;
    const size = Math.min(2_000, count - made);
    const owners = Array.from({ length: 10 }, () => userId(randomInt(users)));
    const batch = Array.from({ length: size }, (_, i) => ({
      id: `i${tag}_${made + i}`,
      userId: owners[Math.floor(i / 200)] as string,
      amountKobo: BigInt(randomInt(100, 5_000_000)),
      direction: randomInt(3) === 0 ? LedgerEntry_Direction.OUTFLOW : LedgerEntry_Direction.INFLOW,
      counterpartyId: `cp${randomInt(50)}`,
      channel: "transfer",
      occurredAt: timestampFromDate(new Date(Date.now() - randomInt(0, 30 * 86_400_000))),
    }));
    made += size;
    return batch;
  };
  const start = performance.now();
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let b = next(); b; b = next()) {
        // Awaited first: `inserted += await …` reads `inserted` before the call and loses the others' adds.
        const res = await ingest.ingestLedgerEntries({ entries: b });
        inserted += res.inserted;
      }
    }),
  );
  return { entries: inserted, entriesPerSecond: Math.round(inserted / ((performance.now() - start) / 1000)) };
}

/** Snapshot paths of the readers, windows 30, 90 and 365 days. */
export const snapshotPaths = (readers: number[]) =>
  readers.flatMap((u) =>
    [30, 90, 365].map((w) => `/partner/v1/users/${userId(u)}/snapshot?ledger_window_days=${w}`),
  );

/** Latency at 200 req/s (open loop) and saturation (50 connections), after every path is read once. */
export async function snapshotReads(b: Bench, paths: string[]) {
  let i = 0;
  const headers = { authorization: `Bearer ${b.key}` };
  const run = (opts: { connections: number; duration?: number; amount?: number }) =>
    autocannon({
      url: b.partnerUrl,
      ...opts,
      headers,
      requests: [
        {
          setupRequest: ((req: Record<string, unknown>) => {
            req.path = paths[i++ % paths.length];
            return req;
          }) as never,
        },
      ],
    });
  await run({ connections: 10, amount: paths.length });
  const steady = await paced(b.partnerUrl, () => paths[i++ % paths.length] as string, {
    rate: 200,
    seconds: b.seconds,
    headers,
  });
  const saturated = await run({ connections: 50, duration: b.seconds });
  return {
    p50Ms: steady.p50Ms,
    p99Ms: steady.p99Ms,
    perSecond: Math.round(saturated.requests.average),
    non2xx: steady.non2xx + saturated.non2xx + steady.errors,
  };
}

/**
 * p99 of a partner's list pages (events, a webhook's deliveries, disbursements, books, webhooks with their
 * stats): the first page and the next five by cursor of each, read at 40 req/s; pages of the API's default
 * size, or of `limit` rows.
 */
export async function listPages(b: Bench, limit?: number): Promise<Record<string, number>> {
  const headers = { authorization: `Bearer ${b.key}` };
  const get = async (path: string) => {
    const res = await fetch(`${b.partnerUrl}${path}`, { headers });
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<Record<string, unknown>>;
  };
  // REST answers the list itself (CONTRACT.md §5).
  const hooks = (await get("/partner/v1/webhooks")) as unknown as { id: string }[];
  const from = new Date(b.now - 365 * 86_400_000).toISOString().slice(0, 10);
  const to = new Date(b.now).toISOString().slice(0, 10);
  // Each list, and where its next page starts (a page's last id, or the books' own cursor).
  const lastId = (field: string) => (body: Record<string, unknown>) =>
    body.hasMore ? (body[field] as { id: string }[]).at(-1)?.id : undefined;
  const size = limit ? `limit=${limit}` : "";
  const query = (...params: string[]) => `?${[...params, size].filter(Boolean).join("&")}`;
  const lists: Record<string, [string, (body: Record<string, unknown>) => string | undefined]> = {
    events: [`/partner/v1/events${query()}`, lastId("events")],
    deliveries: [`/partner/v1/webhooks/${hooks[0]?.id}/deliveries${query()}`, lastId("deliveries")],
    disbursements: [`/partner/v1/disbursements${query()}`, lastId("disbursements")],
    books: [
      `/partner/v1/books${query(`from=${from}`, `to=${to}`)}`,
      (body) => body.nextStartingAfter as string,
    ],
    webhooks: ["/partner/v1/webhooks", () => undefined],
  };
  const out: Record<string, number> = {};
  for (const [name, [first, cursorOf]] of Object.entries(lists)) {
    const pages = [first];
    for (let k = 0; k < 5; k++) {
      const cursor = cursorOf(await get(pages.at(-1) as string));
      if (!cursor) break;
      pages.push(`${first}${first.endsWith("?") ? "" : "&"}starting_after=${encodeURIComponent(cursor)}`);
    }
    let n = 0;
    const r = await paced(b.partnerUrl, () => pages[n++ % pages.length] as string, {
      rate: 40,
      seconds: Math.max(5, Math.round(b.seconds / 2)),
      headers,
    });
    if (r.non2xx || r.errors) throw new Error(`${name}: ${JSON.stringify(r.statuses)}`);
    out[name] = r.p99Ms;
  }
  return out;
}

/**
 * Writes a month of expired events (every partner of the first `factor` units), then times one retention pass
 * of the webhooks' purge steps (the service's own, RETENTION_DAYS = `retentionDays`) while snapshot reads run at
 * 200 req/s. The pass stops at `budgetMs`, as the hourly job does at its budget.
 */
export async function retentionPass(
  b: Bench,
  factor: number,
  retentionDays: number,
  paths: string[],
  budgetMs: number,
) {
  const logger = createLogger({ level: "warn", write: (l) => process.stderr.write(`${l}\n`) });
  const orm = await createOrm({ databaseUrl: b.databaseUrl, schema, poolSize: 2, logger });
  // The month's partitions, as the housekeeping makes them (an earlier pass dropped them).
  const [monthStarts] = expiredMonthOf(b.now, retentionDays);
  for (const t of [EVENTS, DELIVERIES, ATTEMPTS])
    await ensurePartitions(orm.em.fork(), t, new Date(monthStarts), new Date(monthStarts));
  const written = await expiredMonth(b.pool, b.shape, factor, b.now, retentionDays);
  await b.pool.query("vacuum (analyze) events, webhook_deliveries, webhook_attempts");
  await b.pool.query("checkpoint");
  const retention = createRetentionService({
    clock: systemClock,
    retention: { days: retentionDays, sandboxDays: retentionDays, batchSize: 500, auditDays: retentionDays },
    metrics: createMetrics(),
    logger,
    steps: webhookPurges,
    budgetMs,
  });
  let i = 0;
  let reading = true;
  const reads = (async () => {
    const all: { p99Ms: number; non2xx: number }[] = [];
    while (reading)
      all.push(
        await paced(b.partnerUrl, () => paths[i++ % paths.length] as string, {
          rate: 200,
          seconds: 2,
          headers: { authorization: `Bearer ${b.key}` },
        }),
      );
    return { p99Ms: Math.max(...all.map((r) => r.p99Ms)), non2xx: all.reduce((n, r) => n + r.non2xx, 0) };
  })();
  const start = performance.now();
  const cutoff = new Date(Date.now() - retentionDays * 86_400_000);
  const report = await retention.purge(orm.em.fork());
  const seconds = (performance.now() - start) / 1000;
  reading = false;
  const during = await reads;
  await orm.close();
  const { rows } = await b.pool.query<{ n: number }>(
    "select count(*)::int as n from events where created_at < $1",
    [cutoff],
  );
  const deleted = report.events?.deleted ?? {};
  return {
    eventsWritten: written,
    eventsDeleted: deleted.events ?? 0,
    deliveriesDeleted: deleted.webhook_deliveries ?? 0,
    attemptsDeleted: deleted.webhook_attempts ?? 0,
    eventsLeft: rows[0]?.n ?? 0,
    seconds: Number(seconds.toFixed(1)),
    readP99Ms: during.p99Ms,
    readNon2xx: during.non2xx,
  };
}

/** Bytes on disk (tables and indexes) per raw ledger entry (with the roll-ups) and per event (with its deliveries and attempts). */
export async function bytesPerRow(pool: pg.Pool, entries: number) {
  const size = async (tables: string[]) => {
    const { rows } = await pool.query<{ bytes: string }>(
      // A partitioned table's own size is 0: its partitions' are added.
      `select sum(pg_total_relation_size(c.oid))::text as bytes from pg_class c
        where c.oid = any($1::regclass[])
           or c.oid in (select inhrelid from pg_inherits where inhparent = any($1::regclass[]))`,
      [tables],
    );
    return Number(rows[0]?.bytes ?? 0);
  };
  const { rows } = await pool.query<{ n: number }>("select count(*)::int as n from events");
  const events = rows[0]?.n ?? 1;
  return {
    bytesPerEntry: Math.round(
      (await size(["ledger_entries", "ledger_daily", "ledger_counterparties"])) / entries,
    ),
    bytesPerEvent: Math.round((await size(["events", "webhook_deliveries", "webhook_attempts"])) / events),
    databaseGb: Number(
      (
        Number((await pool.query("select pg_database_size(current_database())::text as b")).rows[0].b) /
        2 ** 30
      ).toFixed(1),
    ),
  };
}
