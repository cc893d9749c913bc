import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bruteForceWindow, generateEntries, ingestEntries } from "../factories/ledger.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { PROCESS_TEST_TIMEOUT_MS, runCli } from "../support/process.ts";
import { eventually } from "../support/wait.ts";

// The operator's repair of a user's ledger roll-ups: `npm run cli -- ledger rebuild --user U` folds the raw
// entries again with ingest's own statement, so a snapshot reads what the entries say, however the roll-ups
// were damaged, and a rebuild racing ingest loses nothing and counts nothing twice.

let t: TestApp;
let p: PartnerFixture;
let db: pg.Client;
beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
  db = new pg.Client({ connectionString: t.databaseUrl });
  await db.connect();
});
afterAll(async () => {
  await db?.end();
  await t?.stop();
});

const cli = (...args: string[]) =>
  runCli(args, { INTERNAL_URL: t.internalUrl, INTERNAL_TOKEN: t.internalToken, DATA_DIR: "" });
const windowOf = async (userId: string, days: number) => {
  const res = await rest(
    t.partnerUrl,
    "GET",
    `/partner/v1/users/${userId}/snapshot?ledger_window_days=${days}`,
    {
      key: p.sandboxKey,
    },
  );
  expect(res.status).toBe(200);
  return res.body.ledgerWindow;
};
const trader = async () => {
  const u = await createUser(t, { segment: "trader" });
  await t.internal.consents.grantConsent({
    userId: u.userId,
    partnerId: p.partnerId,
    scopes: ["ledger"],
    ledgerWindowDays: 365,
    maxLedgerWindowDays: 365,
  });
  return u.userId;
};
const rollups = async (userId: string) =>
  (
    await db.query(
      `select day::text, scope, inflow_kobo::text, inflow_count, outflow_kobo::text, outflow_count
         from ledger_daily where user_id = $1 order by day, scope`,
      [userId],
    )
  ).rows;

describe("ledger rebuild", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("restores damaged roll-ups from the raw entries, and a second run writes the same rows", async () => {
    const userId = await trader();
    const entries = generateEntries(userId, 800, 400, 60);
    await ingestEntries(t, entries);
    const healthy = await rollups(userId);
    // Damage: a third of the days gone, the rest doubled, the counterparties emptied and their counts inflated.
    await db.query("delete from ledger_daily where user_id = $1 and extract(day from day)::int % 3 = 0", [
      userId,
    ]);
    await db.query(
      "update ledger_daily set inflow_kobo = inflow_kobo * 2, outflow_count = outflow_count + 1 where user_id = $1",
      [userId],
    );
    await db.query("delete from ledger_counterparties where user_id = $1", [userId]);
    await db.query("update ledger_counterparty_days set parties = parties + 3 where user_id = $1", [userId]);
    expect(await windowOf(userId, 365)).not.toEqual(bruteForceWindow(entries, 365));

    const run = await cli("ledger", "rebuild", "--user", userId, "--json");
    expect(run.code, run.stderr).toBe(0);
    const day = (d: Date) => d.toISOString().slice(0, 10);
    expect(JSON.parse(run.stdout)).toEqual({
      users: 1,
      entries: 800,
      days: new Set(entries.map((e) => day(e.occurredAt))).size,
      counterparties: new Set(entries.map((e) => `${e.direction}:${e.counterpartyId}`)).size,
    });
    for (const days of [30, 90, 365])
      expect(await windowOf(userId, days)).toEqual(bruteForceWindow(entries, days));
    expect(await rollups(userId)).toEqual(healthy);

    const again = await cli("ledger", "rebuild", "--user", userId);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("rebuilt the roll-ups of 1 user from 800 ledger entries");
    expect(await rollups(userId)).toEqual(healthy);
  });

  it("loses and doubles nothing when ingest of the same user runs during the rebuild", async () => {
    const userId = await trader();
    const first = generateEntries(userId, 2_000, 200, 50);
    await ingestEntries(t, first);
    const later = generateEntries(userId, 2_000, 200, 50);
    // Eight ingest batches and twelve rebuilds of the same user at once, in no set order.
    const rebuilds = Array.from({ length: 12 }, () =>
      t.internal.ingest.rebuildLedgerRollups({ userIds: [userId] }),
    );
    const batches = Array.from({ length: 8 }, (_, i) =>
      ingestEntries(t, later.slice(i * 250, (i + 1) * 250)),
    );
    await Promise.all([...rebuilds, ...batches]);
    for (const days of [30, 365])
      expect(await windowOf(userId, days)).toEqual(bruteForceWindow([...first, ...later], days));
  });

  it("reads only its users' entries, through the index, even where the planner's statistics overcount them", async () => {
    // A hundred users bulk-loaded straight into ledger_entries (the case a rebuild repairs), 500 entries each.
    const ids = await Promise.all(Array.from({ length: 100 }, async () => (await createUser(t)).userId));
    await db.query(
      `insert into ledger_entries (id, user_id, amount_kobo, direction, counterparty_hash, channel, occurred_at, day, scope)
       select u || ':' || n, u, 100 + n, 'IN', sha256(convert_to(u || (n % 7), 'UTF8')), 'transfer', at, at::date, ''
         from unnest($1::text[]) u, generate_series(1, 500) n, lateral (select now() - n * interval '13 hours' as at) t`,
      [ids],
    );
    // What a skewed sample tells the planner at scale: few distinct users, so each seems to own a tenth of the rows.
    await db.query("alter table ledger_entries alter column user_id set (n_distinct = 10)");
    await db.query("analyze ledger_entries");
    const scans = async () =>
      (
        await db.query<{ seq: number; idx: number }>(
          `select seq_scan::int as seq, idx_scan::int as idx from pg_stat_user_tables where relname = 'ledger_entries'`,
        )
      ).rows[0];
    try {
      const before = await scans();
      expect(await t.internal.ingest.rebuildLedgerRollups({ userIds: ids })).toMatchObject({
        entries: 50_000,
      });
      // The service's session reports its counts within 10 s of going idle: wait for the rebuild's scans.
      const after = await eventually(
        async () => {
          const now = await scans();
          return now && before && (now.idx > before.idx || now.seq > before.seq) ? now : undefined;
        },
        { what: "the rebuild's scans of ledger_entries counted", timeoutMs: 30_000 },
      );
      expect({ wholeTableScans: (after.seq ?? 0) - (before?.seq ?? 0) }).toEqual({ wholeTableScans: 0 });
    } finally {
      await db.query("alter table ledger_entries alter column user_id reset (n_distinct)");
      await db.query("analyze ledger_entries");
    }
  });

  it("refuses unknown users, too many at once, and a call without users", async () => {
    const unknown = await cli("ledger", "rebuild", "--user", "usr_nobody_here");
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain("unknown users: usr_nobody_here");
    const many = Array.from({ length: 101 }, (_, i) => `usr_many${i}`).join(",");
    const tooMany = await cli("ledger", "rebuild", "--user", many);
    expect(tooMany.code).not.toBe(0);
    expect(tooMany.stderr).toContain("at most 100 users per call");
    const none = await cli("ledger", "rebuild");
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("--user is required");
  });
});

describe("distinct counterparties, counted per last day", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  /** A user's counterparties per direction, scope and last day, as their rows say and as their counts say. */
  const counts = async (userId: string) => {
    const { rows: truth } = await db.query(
      `select direction, scope, last_day::text, count(*)::int as n from ledger_counterparties where user_id = $1
        group by 1, 2, 3 order by 1, 2, 3`,
      [userId],
    );
    const { rows: kept } = await db.query(
      `select direction, scope, last_day::text, parties as n from ledger_counterparty_days
        where user_id = $1 and parties <> 0 order by 1, 2, 3`,
      [userId],
    );
    return { truth, kept };
  };

  it("stay exact when concurrent batches of one user meet the same counterparties out of order, and again", async () => {
    const userId = await trader();
    // 30 counterparties met 3,000 times over 400 days, in twelve batches at once, three of them sent twice.
    const entries = generateEntries(userId, 3_000, 400, 30);
    const batches = Array.from({ length: 12 }, (_, i) => entries.slice(i * 250, (i + 1) * 250));
    await Promise.all([...batches, ...batches.slice(0, 3)].map((b) => ingestEntries(t, b)));
    const { truth, kept } = await counts(userId);
    expect(kept).toEqual(truth);
    const { rows } = await db.query(
      "select count(*)::int as n from ledger_counterparty_days where user_id = $1 and parties < 0",
      [userId],
    );
    expect(rows[0].n).toBe(0);
    for (const days of [1, 7, 30, 90, 365])
      expect(await windowOf(userId, days)).toEqual(bruteForceWindow(entries, days));
  });

  it("are rebuilt with the roll-ups: a rebuild leaves no day at 0 and the same windows", async () => {
    const userId = await trader();
    // Met every day, newest last: each batch moves every counterparty's last day, leaving the days it left at 0.
    const entries = generateEntries(userId, 1_200, 60, 10).sort(
      (a, b) => a.occurredAt.getTime() - b.occurredAt.getTime(),
    );
    for (let i = 0; i < entries.length; i += 100) await ingestEntries(t, entries.slice(i, i + 100));
    const zeros = async () =>
      (
        await db.query(
          "select count(*)::int as n from ledger_counterparty_days where user_id = $1 and parties = 0",
          [userId],
        )
      ).rows[0].n;
    expect(await zeros()).toBeGreaterThan(0);
    const before = await windowOf(userId, 30);
    expect((await t.internal.ingest.rebuildLedgerRollups({ userIds: [userId] })).entries).toBe(1_200);
    expect(await zeros()).toBe(0);
    const { truth, kept } = await counts(userId);
    expect(kept).toEqual(truth);
    expect(await windowOf(userId, 30)).toEqual(before);
    expect(before).toEqual(bruteForceWindow(entries, 30));
  });
});
