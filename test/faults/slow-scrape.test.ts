import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SCRAPE_BUDGET_MS } from "../../src/platform/metrics-render.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

// During a database incident the scrape is what tells the operator: it must arrive (within Prometheus's default
// 10 s scrape time-out), say which families it could not read, and take no connection a partner's call needs,
// however many scrapers ask, or give up and ask again.
let t: TestApp;
let p: PartnerFixture;
let locker: pg.Client | undefined;
beforeAll(async () => {
  t = await startTestApp({ config: { role: "api" } });
  p = await createPartner(t);
});
afterAll(async () => {
  await locker?.query("rollback").catch(() => undefined);
  await locker?.end();
  await t?.stop();
});

const scrape = async (signal?: AbortSignal) => {
  const started = performance.now();
  const res = await fetch(`${t.internalUrl}/metrics`, {
    headers: { authorization: `Bearer ${t.internalToken}` },
    ...(signal && { signal }),
  });
  return { text: await res.text(), status: res.status, ms: performance.now() - started };
};

describe("a scrape while tables are locked", () => {
  it("arrives within its budget, says what it left out, and holds no partner call", async () => {
    // An operator's migration (or a stuck transaction) holds the tables the gauges count.
    locker = new pg.Client({ connectionString: t.databaseUrl });
    await locker.connect();
    await locker.query("begin");
    await locker.query("lock table webhook_deliveries, disbursements, installments in access exclusive mode");

    // Scrapers that give up after a second and ask again (as a Prometheus with a short time-out would), and one
    // that waits for its answer; partner calls meanwhile, on tables nobody locked.
    const abandoned = Array.from({ length: 6 }, () =>
      scrape(AbortSignal.timeout(1_000)).catch(() => undefined),
    );
    const patient = scrape();
    const calls = await Promise.all(
      Array.from({ length: 20 }, () => rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: p.sandboxKey })),
    );
    expect(calls.map((c) => c.status)).toEqual(Array(20).fill(200));

    // While the scrapes are being answered, at most one of the service's connections waits on the lock: the
    // scrapers share one reading, which reads one family at a time.
    const waiting = await locker.query<{ n: number }>(
      `select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`,
    );
    expect(waiting.rows[0]?.n ?? 0).toBeLessThanOrEqual(1);

    const { text, status, ms } = await patient;
    await Promise.all(abandoned);
    expect(status).toBe(200);
    // The families on locked tables are left out, with their reason, and counted.
    for (const family of ["webhook_deliveries_due", "payouts_in_flight", "debits_due"])
      expect(text).toMatch(new RegExp(`^# ${family} unavailable: .+`, "m"));
    const left = Number(/^metrics_families_unavailable (\d+)$/m.exec(text)?.[1]);
    expect(left).toBeGreaterThanOrEqual(3);
    // The rest is there: the process's own, the counters, the pools.
    expect(text).toMatch(/^http_requests_total\{/m);
    expect(text).toMatch(/^db_pool_connections\{/m);
    // Well inside Prometheus's default 10 s scrape time-out (the budget is 5 s; each read gives up within 1 s).
    expect(ms).toBeLessThan(SCRAPE_BUDGET_MS + 4_000);

    await locker.query("rollback");

    // Unlocked, the next scrape reads everything.
    const after = await scrape();
    expect(after.text).toMatch(/^metrics_families_unavailable 0$/m);
    expect(after.text).toMatch(/^webhook_deliveries_oldest_due_seconds /m);
  });
});
