import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultExpensiveLimits } from "../../src/config/rate-limits.ts";
import { scopes } from "../../src/consent/scopes.ts";
import { generateEntries, ingestEntries } from "../factories/ledger.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createConsentedUser, createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { createTestDatabase } from "../support/db.ts";
import { type PgBouncer, pgbouncerAvailable, startPgBouncer } from "../support/pgbouncer.ts";
import { runScript } from "../support/process.ts";
import { eventually, settleChangeFeed } from "../support/wait.ts";

// The service with DATABASE_URL pointing at a real PgBouncer in transaction mode, and DATABASE_DIRECT_URL at the
// server itself for what needs a session (LISTEN, pg-boss, the migration lock). Five server connections for the
// service's pool of five and the tests' own: every transaction may land on another session.
const available = pgbouncerAvailable();
if (!available)
  console.warn("pgbouncer is not installed: the pooler tests are skipped (.ci/run installs it)");

let direct: string;
let bouncer: PgBouncer;
let t: TestApp;
let p: PartnerFixture;

beforeAll(async () => {
  if (!available) return;
  direct = await createTestDatabase();
  // Behind a pooler the service sets no time-out when it connects: they are the role's, as docs/operations.md says.
  const owner = new pg.Client({ connectionString: direct });
  await owner.connect();
  const db = new URL(direct).pathname.slice(1);
  await owner.query(`alter role current_user in database ${db} set statement_timeout = '30s'`);
  await owner.query(
    `alter role current_user in database ${db} set idle_in_transaction_session_timeout = '10s'`,
  );
  await owner.end();
  bouncer = await startPgBouncer(direct, { defaultPoolSize: 5 });
  t = await startTestApp({
    databaseUrl: bouncer.url,
    config: {
      directUrl: direct,
      // 24 reads in flight at once on one key: the point here is the pooler, not the limit on reads in flight.
      expensiveLimits: { ...defaultExpensiveLimits, snapshotConcurrencyPerKey: 100 },
    },
  });
  p = await createPartner(t);
}, 120_000);

afterAll(async () => {
  await t?.stop();
  await bouncer?.stop();
}, 60_000);

/** PgBouncer's clients, by application name. */
async function bouncerClients(): Promise<string[]> {
  const admin = new pg.Client({ connectionString: bouncer.adminUrl });
  await admin.connect();
  try {
    // The admin console speaks the simple query protocol only (a query without parameters is sent so).
    const res = await admin.query<{ application_name: string }>("show clients");
    return res.rows.map((r) => r.application_name);
  } finally {
    await admin.end();
  }
}

describe.skipIf(!available)("behind PgBouncer in transaction mode", () => {
  it("answers 24 parallel snapshot reads, round after round, with no prepared-statement clash", async () => {
    const { userId } = await createUser(t, { segment: "trader" });
    await ingestEntries(t, generateEntries(userId, 60));
    await t.internal.consents.grantConsent({
      userId,
      partnerId: p.partnerId,
      scopes: [...scopes],
      ledgerWindowDays: 90,
      maxLedgerWindowDays: 365,
    });
    for (let round = 0; round < 10; round++) {
      const answers = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          rest(
            t.partnerUrl,
            "GET",
            `/partner/v1/users/${userId}/snapshot?ledger_window_days=${[30, 90, 365][i % 3]}`,
            {
              key: p.sandboxKey,
            },
          ),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(24).fill(200));
    }
  });

  it("runs the quickstart end to end: consent link, snapshot, disbursement, its webhooks, a collected repayment", async () => {
    const run = await runScript("examples/quickstart.ts", [], {
      BASE_URL: t.partnerUrl,
      API_KEY: p.sandboxKey,
    });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/repayment/i);
  });

  it("keeps LISTEN and pg-boss on the direct connection (a revoked key is refused at once), and the role's time-outs on pooled sessions", async () => {
    const names = await bouncerClients();
    expect(names).toContain("partner-api");
    expect(names).not.toContain("partner-api changes");
    expect(names).not.toContain("partner-api jobs");
    const server = new pg.Client({ connectionString: direct });
    await server.connect();
    try {
      const listening = await server.query(
        "select 1 from pg_stat_activity where datname = current_database() and application_name = 'partner-api changes'",
      );
      expect(listening.rowCount).toBe(1);
      const pooled = await server.query<{ n: string }>(
        `select count(*) as n from pg_stat_activity where datname = current_database()
            and application_name = 'partner-api' and backend_type = 'client backend'`,
      );
      expect(Number(pooled.rows[0]?.n)).toBeGreaterThan(0);
    } finally {
      await server.end();
    }

    const fresh = await createPartner(t);
    await settleChangeFeed(t.app);
    expect((await rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: fresh.sandboxKey })).status).toBe(
      200,
    );
    await t.internal.apiKeys.revokeApiKey({ keyId: fresh.sandboxKeyId });
    const refused = await rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: fresh.sandboxKey });
    expect(refused.status).toBe(401);

    const pooledSession = new pg.Client({ connectionString: bouncer.url });
    await pooledSession.connect();
    try {
      const timeouts = await pooledSession.query(
        "select current_setting('statement_timeout') as statement, current_setting('idle_in_transaction_session_timeout') as idle",
      );
      expect(timeouts.rows[0]).toEqual({ statement: "30s", idle: "10s" });
    } finally {
      await pooledSession.end();
    }
  });
  it("answers 503 to a call that waits for one of its pooled connections past DB_ACQUIRE_TIMEOUT_MS, never holds it", async () => {
    // An instance of its own with two connections to the pooler, both held by reads waiting on a lock.
    const small = await startTestApp({
      databaseUrl: bouncer.url,
      masterKey: t.masterKey,
      config: {
        directUrl: direct,
        dbPoolSize: 2,
        dbTimeouts: { acquireMs: 500, statementMs: 30_000, idleInTransactionMs: 10_000 },
      },
    });
    // One session holds the lock; another watches (within a transaction, pg_stat_activity stays as first read).
    const locker = new pg.Client({ connectionString: direct });
    const watcher = new pg.Client({ connectionString: direct });
    await locker.connect();
    await watcher.connect();
    try {
      const q = await createPartner(small);
      const { userId } = await createConsentedUser(small, q.partnerId);
      const read = () =>
        fetch(`${small.partnerUrl}/partner/v1/users/${userId}/snapshot`, {
          headers: { authorization: `Bearer ${q.sandboxKey}` },
          signal: AbortSignal.timeout(20_000),
        }).then(
          async (r) => ({ status: r.status, code: ((await r.json()) as { code?: string }).code }),
          () => ({ status: 0, code: "no answer in 20 s" }),
        );
      await locker.query("begin");
      await locker.query("lock table consents in access exclusive mode");
      const held = [read(), read()];
      await eventually(
        async () =>
          Number(
            (
              await watcher.query<{ n: string }>(
                `select count(*) as n from pg_stat_activity
                  where datname = current_database() and wait_event_type = 'Lock' and query like '%snapshot_row(%'`,
              )
            ).rows[0]?.n,
          ) === 2,
        { what: "both pooled connections waiting on the lock" },
      );
      expect(await read()).toEqual({ status: 503, code: "unavailable" });
      await locker.query("commit");
      expect((await Promise.all(held)).map((r) => r.status)).toEqual([200, 200]);
    } finally {
      await locker.end();
      await watcher.end();
      await small.stop();
    }
  });
});
