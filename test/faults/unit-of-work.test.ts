import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { acceptMandate } from "../support/mandates.ts";
import { eventually } from "../support/wait.ts";

const apps: TestApp[] = [];
afterAll(() => Promise.all(apps.map((a) => a.stop())));

const relaxed = {
  read: { capacity: 10_000, refillPerSecond: 10_000 },
  write: { capacity: 10_000, refillPerSecond: 10_000 },
};
const start = async (...args: Parameters<typeof startTestApp>) => {
  const t = await startTestApp(...args);
  apps.push(t);
  return t;
};
const count = async (t: TestApp, text: string, params: unknown[] = []) =>
  (await sql<{ n: number }>(t.app.orm.em.fork(), `select count(*)::int as n from (${text}) q`, params))[0]?.n;

/** Holds `n` pooled connections, each in a transaction, until `release()` (a stuck unit of work). */
async function hold(t: TestApp, n: number) {
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  let held = 0;
  const holders = [...Array(n)].map(() =>
    t.app.orm.em
      .fork()
      .transactional(async (tx) => {
        await sql(tx, "select 1");
        held++;
        await gate;
      })
      .catch((err: unknown) => err),
  );
  await eventually(() => held === n, { what: `${n} connections held` });
  return {
    release: async () => {
      release();
      return Promise.all(holders);
    },
  };
}

describe("a settlement that rolls back", () => {
  it("leaves no ledger entry, no book entry, no event and no job; a retry then proceeds as if nothing started", async () => {
    const t = await start({ config: { rateLimits: relaxed } });
    const p: PartnerFixture = await createPartner(t);
    await createWebhook(t.partnerUrl, p.sandboxKey, { url: "http://127.0.0.1:9/hooks", events: ["*"] });
    const u = await createUser(t, { environment: "sandbox" });
    await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: p.partnerId,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    const created = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
      key: p.sandboxKey,
      headers: { "idempotency-key": "rollback-1" },
      body: {
        userId: u.userId,
        principalKobo: "1000000",
        destination: "WALLET",
        reference: "rollback-1",
        repaymentSchedule: {
          installments: [
            {
              dueDate: new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10),
              amountKobo: "1100000",
            },
          ],
        },
        scheduleAcceptedAt: new Date().toISOString(),
      },
    });
    expect(created.status).toBe(200);
    await acceptMandate(t, p.sandboxKey, created.body.id);
    const get = (path: string) => rest(t.partnerUrl, "GET", path, { key: p.sandboxKey });
    await eventually(
      async () => (await get(`/partner/v1/disbursements/${created.body.id}`)).body.status === "DELIVERED",
    );
    const id = (await get(`/partner/v1/disbursements/${created.body.id}/repayments`)).body.repayments[0]
      .id as string;
    expect(id).toMatch(/^rpy_[0-9A-Z]{26}_1$/);

    // The database refuses to commit the settlement: a deferred check fails at COMMIT, after the ledger entry,
    // the book entry, the event, its delivery and its job were all written in the transaction.
    const em = t.app.orm.em.fork();
    await sql(
      em,
      `create function pua_refuse_commit() returns trigger language plpgsql as $$
         begin raise exception 'commit refused by the test'; end $$`,
    );
    await sql(
      em,
      `create constraint trigger pua_refuse_settlement after insert on events
         deferrable initially deferred for each row
         when (new.type = 'REPAYMENT_COLLECTED' and new.body like '%${id}%')
         execute function pua_refuse_commit()`,
    );
    const collect = () =>
      rest(t.partnerUrl, "POST", `/partner/v1/sandbox/repayments/${id}/collect`, {
        key: p.sandboxKey,
        body: { outcome: "SUCCESS" },
      });
    const refused = await collect();
    expect(refused.status).toBe(500);
    expect(refused.body.code).toBe("internal");

    expect(await count(t, "select 1 from ledger_entries where id = $1", [`repayment:${id}`])).toBe(0);
    expect(await count(t, "select 1 from book_entries where installment_id = $1", [id])).toBe(0);
    expect(await count(t, "select 1 from events where body like $1", [`%${id}%`])).toBe(0);
    // No job outlives the rollback: every delivery job names a delivery that was committed.
    expect(
      await count(
        t,
        `select 1 from pgboss.job j where j.name like 'webhooks.deliver%'
           and not exists (select 1 from webhook_deliveries d where d.id = j.data->>'deliveryId')`,
      ),
    ).toBe(0);
    expect(
      (await get(`/partner/v1/disbursements/${created.body.id}/repayments`)).body.repayments[0],
    ).toMatchObject({
      status: "SCHEDULED",
    });

    await sql(em, "drop trigger pua_refuse_settlement on events");
    const collected = await collect();
    expect(collected.status).toBe(200);
    expect(collected.body.status).toBe("COLLECTED");
    expect(await count(t, "select 1 from ledger_entries where id = $1", [`repayment:${id}`])).toBe(1);
    expect(await count(t, "select 1 from book_entries where installment_id = $1", [id])).toBe(1);
    expect(
      await count(t, "select 1 from events where type = 'REPAYMENT_COLLECTED' and body like $1", [`%${id}%`]),
    ).toBe(1);
  });
});

describe("an exhausted pool", () => {
  it("answers 503 unavailable with Retry-After on every face, never hangs, and serves as soon as load drops", async () => {
    const t = await start({
      config: {
        role: "api",
        dbPoolSize: 2,
        dbTimeouts: { acquireMs: 200, statementMs: 30_000, idleInTransactionMs: 60_000 },
        rateLimits: relaxed,
      },
    });
    const p = await createPartner(t);
    const list = () => rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: p.sandboxKey });
    const write = (i: number) =>
      rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
        key: p.sandboxKey,
        headers: { "idempotency-key": `busy-${i}` },
        body: { url: `http://127.0.0.1:9/h${i}`, events: ["*"] },
      });
    expect((await list()).status).toBe(200);

    const stuck = await hold(t, 2);
    for (const res of [await list(), await write(1)]) {
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ code: "unavailable", requestId: expect.stringMatching(/^req_/) });
      expect(res.headers.get("retry-after")).toBe("1");
    }
    const connect = await fetch(`${t.partnerUrl}/partner.v1.WebhookService/ListWebhooks`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${p.sandboxKey}` },
      body: "{}",
    });
    expect(connect.status).toBe(503);
    expect(await connect.json()).toMatchObject({ code: "unavailable" });
    expect((await fetch(`${t.partnerUrl}/readyz`)).status).toBe(503);
    await stuck.release();

    expect((await list()).status).toBe(200);
    expect((await write(1)).status).toBe(200);
    expect((await fetch(`${t.partnerUrl}/readyz`)).status).toBe(200);

    // A burst far larger than the pool: every call answers, with 200 or a 503 the client may retry.
    const answers = await Promise.all([...Array(200)].map((_, i) => (i % 10 ? list() : write(100 + i))));
    for (const res of answers) {
      expect([200, 503]).toContain(res.status);
      if (res.status === 503) expect(res.headers.get("retry-after")).toBe("1");
    }
    expect((await list()).status).toBe(200);
  });

  it("kills a transaction left idle, says so in the log, and recovers without a restart", async () => {
    const lines: string[] = [];
    const t = await start({
      onLog: (line) => lines.push(line),
      config: {
        role: "api",
        dbPoolSize: 2,
        dbTimeouts: { acquireMs: 5_000, statementMs: 30_000, idleInTransactionMs: 300 },
        rateLimits: relaxed,
      },
    });
    const p = await createPartner(t);
    const stuck = await hold(t, 2);
    // A request arriving now waits for a connection; the stuck ones are ended by PostgreSQL meanwhile.
    const waiting = rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: p.sandboxKey });
    await eventually(
      () => lines.filter((l) => l.includes("killed a transaction left idle too long")).length === 2,
      {
        what: "two killed transactions logged",
      },
    );
    const outcomes = await stuck.release();
    // The stuck units of work learn that their transaction is gone; nothing they did was committed.
    for (const o of outcomes) expect(String(o)).toMatch(/idle-in-transaction|terminat|connection error/i);
    expect((await waiting).status).toBe(200);
    expect((await rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: p.sandboxKey })).status).toBe(200);
  });
});

describe("the configuration", () => {
  it("documents and bounds the database time-outs", () => {
    expect(loadConfig({}).dbTimeouts).toEqual({
      acquireMs: 3_000,
      statementMs: 30_000,
      idleInTransactionMs: 10_000,
    });
    expect(
      loadConfig({
        DB_ACQUIRE_TIMEOUT_MS: "250",
        DB_STATEMENT_TIMEOUT_MS: "5000",
        DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: "2000",
      }).dbTimeouts,
    ).toEqual({ acquireMs: 250, statementMs: 5_000, idleInTransactionMs: 2_000 });
    expect(() => loadConfig({ DB_ACQUIRE_TIMEOUT_MS: "0" })).toThrow(/DB_ACQUIRE_TIMEOUT_MS/);
  });
});
