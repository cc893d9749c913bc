import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ms } from "../../src/platform/clock.ts";
import { ensurePartitions, listPartitions, monthStart } from "../../src/platform/db/partitions.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { ulid } from "../../src/platform/ids.ts";
import type { PurgeReport } from "../../src/retention/retention.service.ts";
import {
  ATTEMPTS,
  DELIVERIES,
  EVENTS,
  ensureWebhookPartitions,
} from "../../src/webhooks/webhook-partition.repository.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

// Events, deliveries and attempts as monthly partitions (docs/operations.md "Partitions"): made ahead by the
// housekeeping, read one month at a time where a query names an id, and dropped whole by the retention purge
// once a month is past retention, the edges deleted row by row.

const NOW = Date.now();
let t: TestApp;
let p: PartnerFixture;
let hook: string;
const em = () => t.app.orm.em.fork();
const q = <T = Record<string, unknown>>(text: string, params: unknown[] = []) => sql<T>(em(), text, params);
const names = async () =>
  Object.fromEntries(
    await Promise.all(
      [EVENTS, DELIVERIES, ATTEMPTS].map(async (x) => [
        x.table,
        (await listPartitions(em(), x)).map((r) => r.name),
      ]),
    ),
  ) as Record<string, string[]>;
const month = (add: number) => {
  const m = monthStart(new Date(NOW), add);
  return `${m.getUTCFullYear()}_${String(m.getUTCMonth() + 1).padStart(2, "0")}`;
};

beforeAll(async () => {
  t = await startTestApp({
    config: { retention: { days: 30, sandboxDays: 90, batchSize: 3, auditDays: 365 } },
  });
  await t.app.boss.unschedule("webhooks.housekeeping");
  await t.app.boss.unschedule("retention.purge");
  p = await createPartner(t);
  hook = (await createWebhook(t.partnerUrl, p.sandboxKey, { url: "http://127.0.0.1:9/hooks", events: ["*"] }))
    .id;
});
afterAll(() => t?.stop());

/** An event whose id is of the time `idAt` (its month's partition), raised at `createdAt` by the clock. */
async function event(idAt: number, createdAt: Date): Promise<string> {
  const id = `evt_${ulid(idAt)}`;
  await q(
    `insert into events (id, partner_id, environment, type, body, created_at)
     values ($1, $2, 'sandbox', 'consent.granted', '{}', $3)`,
    [id, p.partnerId, createdAt],
  );
  return id;
}

/** A delivery (id of the time `idAt`) of an event, DELIVERED at `endedAt` or FAILED, with two attempts. */
async function delivery(
  eventId: string,
  idAt: number,
  endedAt: Date | null,
  replayOf?: string,
): Promise<string> {
  const id = `dlv_${ulid(idAt)}`;
  await q(
    `insert into webhook_deliveries (id, event_id, webhook_id, partner_id, environment, status, attempts,
                                     next_attempt_at, delivered_at, created_at, replay_of)
     values ($1, $2, $3, $4, 'sandbox', $5, 2, $6, $7, $8, $9)`,
    [
      id,
      eventId,
      hook,
      p.partnerId,
      endedAt ? "DELIVERED" : "FAILED",
      endedAt ? null : new Date(NOW + ms.hour),
      endedAt,
      new Date(idAt),
      replayOf ?? null,
    ],
  );
  for (const n of [1, 2])
    await q(
      `insert into webhook_attempts (delivery_id, webhook_id, attempt, started_at, succeeded, latency_ms)
       values ($1, $2, $3, $4, $5, 10)`,
      [id, hook, n, new Date(idAt + n * 1000), n === 2 && endedAt !== null],
    );
  return id;
}

const relations = async (statement: string, params: unknown[]) => {
  const [row] = await q<{ "QUERY PLAN": unknown }>(`explain (format json) ${statement}`, params);
  return [...JSON.stringify(row?.["QUERY PLAN"]).matchAll(/"Relation Name":"([a-z_0-9]+)"/g)].map(
    (m) => m[1],
  );
};

describe("monthly partitions", () => {
  it("exist for this month and the next two once migrated, and the housekeeping makes the months ahead", async () => {
    const made = await names();
    for (const table of ["events", "webhook_deliveries", "webhook_attempts"])
      expect(made[table]).toEqual(expect.arrayContaining([0, 1, 2].map((a) => `${table}_${month(a)}`)));
    // Five months on: the housekeeping makes what is missing (that month and the two after), once, however many
    // run at the same time.
    const later = new Date(NOW + 150 * ms.day);
    const runs = await Promise.all([1, 2, 3].map(() => ensureWebhookPartitions(em(), later)));
    const created = runs.flat();
    expect(new Set(created).size).toBe(created.length);
    expect(created).toEqual(expect.arrayContaining([5, 6, 7].map((a) => `events_${month(a)}`)));
    expect(await ensureWebhookPartitions(em(), later)).toEqual([]);
    // Every partition of deliveries, migrated or made ahead, tells the planner that a subscription decides its
    // partner and environment (without it a subscription's page read and sorted all its history).
    const deps = await q<{ part: string }>(
      `select c.relname as part from pg_inherits i join pg_class c on c.oid = i.inhrelid
        where i.inhparent = 'webhook_deliveries'::regclass
          and not exists (select 1 from pg_statistic_ext s where s.stxrelid = c.oid and 'f' = any(s.stxkind)
                            and (select array_agg(attname::text order by attname) from pg_attribute
                                  where attrelid = c.oid and attnum = any(s.stxkeys))
                                = '{environment,partner_id,webhook_id}')`,
    );
    expect(deps).toEqual([]);
    expect(made.webhook_deliveries?.length).toBeGreaterThan(2);
    // A row of a month ahead lands in its own partition.
    const ahead = await event(monthStart(new Date(NOW), 6).getTime() + ms.day, new Date());
    const [where] = await q<{ part: string }>(
      "select tableoid::regclass::text as part from events where id = $1",
      [ahead],
    );
    expect(where?.part).toBe(`events_${month(6)}`);
  });

  it("read one month for a lookup by id, and only the months up to a cursor", async () => {
    const e = await event(NOW, new Date());
    const d = await delivery(e, NOW + 1, new Date());
    expect(await relations("select * from events where id = $1", [e])).toEqual([`events_${month(0)}`]);
    expect(await relations("select * from webhook_deliveries where id = $1", [d])).toEqual([
      `webhook_deliveries_${month(0)}`,
    ]);
    expect(await relations("select * from webhook_attempts where delivery_id = $1", [d])).toEqual([
      `webhook_attempts_${month(0)}`,
    ]);
    // A page of a subscription's deliveries after a cursor of last month: this month's partitions are not read.
    const cursor = `dlv_${ulid(monthStart(new Date(NOW), 0).getTime() - ms.day)}`;
    const read = await relations(
      "select * from webhook_deliveries where webhook_id = $1 and id < $2 order by id desc limit 20",
      [hook, cursor],
    );
    expect(read).not.toContain(`webhook_deliveries_${month(0)}`);
    expect(read.every((r) => r?.startsWith("webhook_deliveries_"))).toBe(true);
  });

  it("drops a month wholly past retention, deletes only the edges row by row, and leaves nothing past retention readable", async () => {
    const old = monthStart(new Date(NOW), -4).getTime();
    const blocked = monthStart(new Date(NOW), -3).getTime();
    for (const table of [EVENTS, DELIVERIES, ATTEMPTS])
      await ensurePartitions(em(), table, new Date(old), new Date(NOW));
    const longAgo = (at: number) => new Date(at + ms.day);

    // A month four months back: three events, each delivered at once; one of them replayed this month, and the
    // replay long DELIVERED (it goes with the month, row by row).
    const gone = [];
    for (let i = 0; i < 3; i++) {
      const e = await event(old + i * ms.hour, longAgo(old));
      gone.push({ event: e, delivery: await delivery(e, old + i * ms.hour + 1, longAgo(old)) });
    }
    const replayOfGone = await delivery(
      gone[0]?.event as string,
      NOW - 40 * ms.day,
      new Date(NOW - 40 * ms.day),
    );
    // Three months back: an event whose replay (this month) is still FAILED keeps its month whole.
    const kept = await event(blocked, longAgo(blocked));
    const keptOriginal = await delivery(kept, blocked + 1, longAgo(blocked));
    const keptReplay = await delivery(kept, NOW, null, keptOriginal);
    const doneInBlocked = await event(blocked + ms.hour, longAgo(blocked));
    await delivery(doneInBlocked, blocked + ms.hour + 1, longAgo(blocked));
    // This month (the edge): one event past retention by the clock (row by row), one inside it.
    const edgeOld = await event(NOW, new Date(NOW - 45 * ms.day));
    await delivery(edgeOld, NOW + 1, new Date(NOW - 45 * ms.day));
    const edgeNew = await event(NOW + 2, new Date(NOW - 5 * ms.day));
    await delivery(edgeNew, NOW + 3, new Date(NOW - 5 * ms.day));

    const report = (await t.app.runJob("retention.purge", {})) as PurgeReport;
    const m = (a: number) => month(a);
    const dropped = report.events?.dropped ?? [];
    expect(dropped).toEqual(
      expect.arrayContaining([`events_${m(-4)}`, `webhook_attempts_${m(-4)}`, `webhook_deliveries_${m(-4)}`]),
    );
    expect(dropped).not.toContain(`events_${m(-3)}`);
    // Any other month dropped (an empty one) ended at least the retry window and a day before the cut-off.
    for (const name of dropped) {
      const [year, mon] = (name.match(/(\d{4})_(\d{2})$/) ?? []).slice(1).map(Number);
      expect(Date.UTC(year as number, mon as number, 1)).toBeLessThanOrEqual(NOW - 45 * ms.day);
    }
    // The replay of the dropped month's event went row by row, with its two attempts; the edge event too.
    expect(report.events?.deleted).toMatchObject({ webhook_deliveries: expect.any(Number) });
    const left = await names();
    expect(left.events).not.toContain(`events_${m(-4)}`);
    expect(left.events).toContain(`events_${m(-3)}`);

    const existing = async (table: string, ids: string[]) =>
      (await q<{ id: string }>(`select id from ${table} where id = any($1::text[])`, [ids]))
        .map((r) => r.id)
        .sort();
    expect(await existing("webhook_deliveries", [replayOfGone])).toEqual([]);
    expect(await existing("events", [edgeOld, doneInBlocked])).toEqual([]);
    expect(await existing("events", [kept, edgeNew]).then((r) => r.length)).toBe(2);
    expect(await existing("webhook_deliveries", [keptOriginal, keptReplay]).then((r) => r.length)).toBe(2);
    const [attempts] = await q<{ n: number }>(
      "select count(*)::int as n from webhook_attempts where delivery_id = any($1::text[])",
      [[replayOfGone, ...gone.map((g) => g.delivery)]],
    );
    expect(attempts?.n).toBe(0);
    // Through the API: what is past retention answers 404, what is inside it 200.
    const get = (path: string) => rest(t.partnerUrl, "GET", path, { key: p.sandboxKey });
    for (const g of gone) expect((await get(`/partner/v1/events/${g.event}`)).status).toBe(404);
    expect((await get(`/partner/v1/events/${edgeOld}`)).status).toBe(404);
    expect((await get(`/partner/v1/events/${edgeNew}`)).status).toBe(200);
    expect((await get(`/partner/v1/events/${kept}`)).status).toBe(200);
    // A second run finds nothing more to drop.
    const again = (await t.app.runJob("retention.purge", {})) as PurgeReport;
    expect(again.events?.dropped).toEqual([]);
  });
});
