import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { MAX_TENOR_DAYS_CEILING } from "../../src/partners/partner.service.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { newId } from "../../src/platform/ids.ts";
import { PG_BOSS_CRON_QUEUE, queueOptions } from "../../src/platform/jobs/boss.ts";
import { FIXTURE_LENDER_ID } from "../../src/platform/tenancy.ts";
import { PURGED_TABLES, type PurgedTable, type PurgeReport } from "../../src/retention/retention.service.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createConsentedUser, createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { acceptMandate } from "../support/mandates.ts";
import { eventually } from "../support/wait.ts";

// Retention (docs/operations.md "Retention", CONTRACT.md §11): one run of the real purge job, on a real
// database, over data made at several points of a manual clock (through the API where the API makes it, by
// SQL where only time would: events, deliveries and attempts of given ages). The batch size is 4, so every
// purge runs in many batches.

const T0 = Date.now();
const at = (daysAgo: number) => new Date(T0 - daysAgo * ms.day);
const clock = new ManualClock(T0);
const BATCH = 4;
/** Replays of replays of one delivery of a deleted webhook: more than a batch. */
const CHAIN = 6;
let t: TestApp;
/** The webhook partner, whose events and deliveries are written by SQL with the ages under test. */
let p1: PartnerFixture;
/** The sandbox lender: consent links and disbursements, through the API. */
let p2: PartnerFixture;

const em = () => t.app.orm.em.fork();
const q = <T = Record<string, unknown>>(text: string, params: unknown[] = []) => sql<T>(em(), text, params);
const ids = async (text: string, params: unknown[] = []) =>
  (await q<{ id: string }>(text, params)).map((r) => r.id).sort();
const purged = async () =>
  Object.fromEntries(
    await Promise.all(
      PURGED_TABLES.map(async (table) => [
        table,
        await t.app.services.metrics.retentionPurged.get({ table }),
      ]),
    ),
  );

beforeAll(async () => {
  t = await startTestApp({
    clock,
    config: {
      retention: { days: 30, sandboxDays: 90, batchSize: BATCH, auditDays: 365 },
      // No sweeper round during the test: the open deliveries written here keep the state they were given.
      webhooks: { ...loadConfig({}).webhooks, sweepIntervalMs: 3_600_000 },
      rateLimits: {
        read: { capacity: 1000, refillPerSecond: 1000 },
        write: { capacity: 1000, refillPerSecond: 1000 },
      },
    },
  });
  // The hourly jobs that delete would race this test's single run (attempt pruning, the purge's own cron).
  await t.app.boss.unschedule("webhooks.housekeeping");
  await t.app.boss.unschedule("retention.purge");
});
afterAll(() => t?.stop());

// ---- what the test writes by SQL ----

async function event(createdAt: Date, partnerId = p1.partnerId): Promise<string> {
  const id = newId("evt");
  await q(
    `insert into events (id, partner_id, environment, type, body, test, created_at)
     values ($1, $2, 'sandbox', 'consent.granted', '{}', false, $3)`,
    [id, partnerId, createdAt],
  );
  return id;
}

/** A delivery in a state: DELIVERED or GIVEN_UP at `endedAt`, or FAILED with its next attempt due. */
async function delivery(
  eventId: string,
  webhookId: string,
  o: {
    createdAt: Date;
    status: "DELIVERED" | "GIVEN_UP" | "FAILED";
    endedAt?: Date;
    replayOf?: string;
    attempts?: number;
  },
): Promise<string> {
  const id = newId("dlv");
  const ended = o.endedAt ?? o.createdAt;
  await q(
    `insert into webhook_deliveries (id, event_id, webhook_id, partner_id, environment, status, attempts,
                                     next_attempt_at, delivered_at, given_up_at, created_at, replay_of)
     values ($1, $2, $3, $4, 'sandbox', $5, $6, $7, $8, $9, $10, $11)`,
    [
      id,
      eventId,
      webhookId,
      p1.partnerId,
      o.status,
      o.attempts ?? 1,
      o.status === "FAILED" ? new Date(T0 + ms.hour) : null,
      o.status === "DELIVERED" ? ended : null,
      o.status === "GIVEN_UP" ? ended : null,
      o.createdAt,
      o.replayOf ?? null,
    ],
  );
  for (let n = 1; n <= (o.attempts ?? 1); n++) {
    await q(
      `insert into webhook_attempts (delivery_id, webhook_id, attempt, started_at, succeeded, latency_ms)
       values ($1, $2, $3, $4, $5, 10)`,
      [id, webhookId, n, o.createdAt, o.status === "DELIVERED" && n === (o.attempts ?? 1)],
    );
  }
  return id;
}

async function consentLinkRow(expiresAt: Date, decidedAt: Date | null, status: string): Promise<string> {
  const id = newId("cnl");
  await q(
    `insert into consent_links (id, partner_id, environment, token_hash, token_enc, phone_hash, phone_last4,
                                scopes, ledger_window_days, max_ledger_window_days, status, expires_at,
                                decided_at, created_at)
     values ($1, $2, 'sandbox', $3, $4, $5, '0001', '{standing}', 30, 30, $6, $7, $8, $9)`,
    [
      id,
      p2.partnerId,
      randomBytes(32),
      randomBytes(48),
      randomBytes(32),
      status,
      expiresAt,
      decidedAt,
      new Date(expiresAt.getTime() - ms.day),
    ],
  );
  return id;
}

// ---- what the test makes through the API ----

const post = (path: string, key: string, body?: unknown, headers?: Record<string, string>) =>
  rest(t.partnerUrl, "POST", path, {
    key,
    ...(body === undefined ? {} : { body }),
    ...(headers ? { headers } : {}),
  });
const get = (path: string, key: string) => rest(t.partnerUrl, "GET", path, { key });
const day = (offset: number) => new Date(clock.now().getTime() + offset * ms.day).toISOString().slice(0, 10);

async function link(key: string, expiresInHours = 24): Promise<string> {
  const res = await post("/partner/v1/consent-links", key, {
    phoneNumber: "+2348000000001",
    scopes: ["standing"],
    ledgerWindowDays: 30,
    expiresInHours,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.id;
}

/** Asks for a sandbox disbursement of p2's, now (by the clock), with installments `dueIn` days ahead. */
async function createDisbursement(reference: string, dueIn: number[]) {
  const u = await createConsentedUser(t, p2.partnerId);
  return post(
    "/partner/v1/disbursements",
    p2.sandboxKey,
    {
      userId: u.userId,
      principalKobo: "100000",
      destination: "BANK",
      reference,
      repaymentSchedule: {
        installments: dueIn.map((d) => ({ dueDate: day(d), amountKobo: String(100000 / dueIn.length) })),
      },
    },
    { "idempotency-key": `idem-${reference}` },
  );
}

/** A sandbox disbursement of p2's, AWAITING_ACCEPTANCE. */
async function disbursement(reference: string, dueIn: number[]): Promise<string> {
  const res = await createDisbursement(reference, dueIn);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.id as string;
}

const status = async (id: string) =>
  (await get(`/partner/v1/disbursements/${id}`, p2.sandboxKey)).body.status;
const settled = (id: string, want: string) =>
  eventually(async () => (await status(id)) === want, { what: `${id} ${want}` });
const repayments = async (id: string): Promise<string[]> =>
  (await get(`/partner/v1/disbursements/${id}/repayments`, p2.sandboxKey)).body.repayments.map(
    (r: { id: string }) => r.id,
  );
const collect = async (repaymentId: string) => {
  const res = await post(`/partner/v1/sandbox/repayments/${repaymentId}/collect`, p2.sandboxKey, {
    outcome: "SUCCESS",
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
};

describe("the retention purge", () => {
  /** Rows the purge must delete, and rows it must keep, by table. */
  const gone: Record<string, string[]> = {};
  const kept: Record<string, string[]> = {};
  const expectGone = (table: string, ...rowIds: string[]) => {
    gone[table] = [...(gone[table] ?? []), ...rowIds];
  };
  const expectKept = (table: string, ...rowIds: string[]) => {
    kept[table] = [...(kept[table] ?? []), ...rowIds];
  };
  let before: Record<string, number>;
  let report: PurgeReport;
  /** Rows hanging on the sandbox disbursements to purge, counted before the run. */
  const hanging: Partial<Record<PurgedTable, number>> = {};
  let fixtureLoans: number;
  const orphanTransfer = newId("dsb");
  const recentOrphanTransfer = newId("dsb");
  const orphanInstallment = newId("rpy");
  let liveOldTransfer: string;

  beforeAll(async () => {
    before = await purged();

    // 100 days ago: webhooks (one deleted then), consent links decided or left to expire, sandbox loans that
    // ended (failed, cancelled, repaid, reversed and refunded) and one still being repaid.
    clock.set(at(100));
    p1 = await createPartner(t);
    p2 = await createPartner(t);
    const w1 = await createWebhook(t.partnerUrl, p1.sandboxKey, {
      url: "http://127.0.0.1:9/a",
      events: ["*"],
    });
    const wDeleted = await createWebhook(t.partnerUrl, p1.sandboxKey, {
      url: "http://127.0.0.1:9/b",
      events: ["*"],
    });
    expect(
      (await rest(t.partnerUrl, "DELETE", `/partner/v1/webhooks/${wDeleted.id}`, { key: p1.sandboxKey }))
        .status,
    ).toBe(200);
    expectKept("webhooks", w1.id);
    expectGone("webhooks", wDeleted.id);

    const accepted = await link(p2.sandboxKey);
    expect((await post(`/partner/v1/sandbox/consent-links/${accepted}/accept`, p2.sandboxKey)).status).toBe(
      200,
    );
    const declined = await link(p2.sandboxKey);
    expect((await post(`/partner/v1/sandbox/consent-links/${declined}/decline`, p2.sandboxKey)).status).toBe(
      200,
    );
    const expired = await link(p2.sandboxKey, 24);
    expectGone("consent_links", accepted, declined, expired);

    const failed = await disbursement("old_fail", [30]);
    await acceptMandate(t, p2.sandboxKey, failed);
    await settled(failed, "FAILED");
    const cancelled = await disbursement("old_cancelled", [30]);
    expect((await post(`/partner/v1/sandbox/disbursements/${cancelled}/decline`, p2.sandboxKey)).status).toBe(
      200,
    );
    expect(await status(cancelled)).toBe("CANCELLED");
    const repaid = await disbursement("old_repaid", [30]);
    await acceptMandate(t, p2.sandboxKey, repaid);
    await settled(repaid, "DELIVERED");
    for (const r of await repayments(repaid)) await collect(r);
    const reversed = await disbursement("old_reversed", [30, 60]);
    await acceptMandate(t, p2.sandboxKey, reversed);
    await settled(reversed, "DELIVERED");
    await collect((await repayments(reversed))[0] as string);
    expect((await post(`/partner/v1/sandbox/disbursements/${reversed}/reverse`, p2.sandboxKey)).status).toBe(
      200,
    );
    await eventually(
      async () =>
        (
          await q("select 1 from installments where disbursement_id = $1 and refund_status = 'REFUNDED'", [
            reversed,
          ])
        ).length === 1,
      { what: "the reversed loan's repayment refunded" },
    );
    const repaying = await disbursement("old_repaying", [200]);
    await acceptMandate(t, p2.sandboxKey, repaying);
    await settled(repaying, "DELIVERED");
    expectGone("disbursements", failed, cancelled, repaid, reversed);
    expectKept("disbursements", repaying);

    // 80 days ago (inside the sandbox's 90): a loan that failed.
    clock.set(at(80));
    const recent = await disbursement("recent_fail", [30]);
    await acceptMandate(t, p2.sandboxKey, recent);
    await settled(recent, "FAILED");
    expectKept("disbursements", recent);

    // 31 days ago: a link accepted at once that would have stayed open a week: retention counts from the decision.
    clock.set(at(31));
    const decidedEarly = await link(p2.sandboxKey, 168);
    expect(
      (await post(`/partner/v1/sandbox/consent-links/${decidedEarly}/accept`, p2.sandboxKey)).status,
    ).toBe(200);
    expectGone("consent_links", decidedEarly);

    // 29 days ago: a link accepted and a webhook deleted, both inside the 30 days.
    clock.set(at(29));
    const recentLink = await link(p2.sandboxKey);
    expect((await post(`/partner/v1/sandbox/consent-links/${recentLink}/accept`, p2.sandboxKey)).status).toBe(
      200,
    );
    const wDeletedRecently = await createWebhook(t.partnerUrl, p1.sandboxKey, {
      url: "http://127.0.0.1:9/c",
      events: ["*"],
    });
    await rest(t.partnerUrl, "DELETE", `/partner/v1/webhooks/${wDeletedRecently.id}`, { key: p1.sandboxKey });
    expectKept("consent_links", recentLink);
    expectKept("webhooks", wDeletedRecently.id);

    // 10 days ago: a link that expired unanswered an hour later.
    clock.set(at(10));
    expectKept("consent_links", await link(p2.sandboxKey, 1));

    // Now: a pending link, and the events, deliveries and attempts of given ages.
    clock.set(T0);
    expectKept("consent_links", await link(p2.sandboxKey));

    // Delivered 31 days ago: gone, with its attempts. Delivered 29 days ago: kept. Given up 31 days ago: gone.
    const e31 = await event(at(31));
    const d31 = await delivery(e31, w1.id, { createdAt: at(31), status: "DELIVERED", attempts: 2 });
    const e29 = await event(at(29));
    const d29 = await delivery(e29, w1.id, { createdAt: at(29), status: "DELIVERED" });
    const eGivenUp = await event(at(45));
    const dGivenUp = await delivery(eGivenUp, w1.id, {
      createdAt: at(45),
      status: "GIVEN_UP",
      endedAt: at(31),
    });
    // FAILED 13 days after it was created, retrying: kept.
    const eFailing = await event(at(13));
    const dFailing = await delivery(eFailing, w1.id, { createdAt: at(13), status: "FAILED" });
    // Delivered 40 days ago, then replayed 13 days ago and still retrying: the replay's window keeps it all.
    const eReplaying = await event(at(40));
    const dReplayed = await delivery(eReplaying, w1.id, { createdAt: at(40), status: "DELIVERED" });
    const dReplaying = await delivery(eReplaying, w1.id, {
      createdAt: at(13),
      status: "FAILED",
      replayOf: dReplayed,
    });
    // Still FAILED 40 days after it was created (say the workers were down past its window): a delivery that may
    // still be attempted is never purged, whatever its age.
    const eStuck = await event(at(40));
    const dStuck = await delivery(eStuck, w1.id, { createdAt: at(40), status: "FAILED" });
    expectKept("events", eStuck);
    expectKept("webhook_deliveries", dStuck);
    // Delivered 60 days ago and replayed, delivered, 20 days ago: kept (its last final state is 20 days old).
    const eReplayed = await event(at(60));
    const dOld = await delivery(eReplayed, w1.id, { createdAt: at(60), status: "DELIVERED" });
    const dReplay = await delivery(eReplayed, w1.id, {
      createdAt: at(20),
      status: "DELIVERED",
      replayOf: dOld,
    });
    expectGone("events", e31, eGivenUp);
    expectGone("webhook_deliveries", d31, dGivenUp);
    expectKept("events", e29, eFailing, eReplaying, eReplayed);
    expectKept("webhook_deliveries", d29, dFailing, dReplayed, dReplaying, dOld, dReplay);

    // The deleted webhook's deliveries, given up when it was deleted 100 days ago: a chain of replays longer than
    // a batch (each replays the one before), so the purge must take them replay first, or a batch would delete a
    // delivery that a replay left for the next batch still points at. Their event had no other delivery, so it
    // goes too.
    const eDeleted = await event(at(101));
    const chain: string[] = [];
    for (let n = 0; n < CHAIN; n++) {
      chain.push(
        await delivery(eDeleted, wDeleted.id, {
          createdAt: at(101 - n / 10),
          status: "GIVEN_UP",
          endedAt: at(100),
          ...(n > 0 ? { replayOf: chain[n - 1] } : {}),
        }),
      );
    }
    // The webhook deleted 29 days ago: its delivery, given up then, is kept with its event.
    const eDeletedRecently = await event(at(29));
    const g4 = await delivery(eDeletedRecently, wDeletedRecently.id, {
      createdAt: at(29),
      status: "GIVEN_UP",
      endedAt: at(29),
    });
    expectGone("events", eDeleted);
    expectGone("webhook_deliveries", ...chain);
    expectKept("events", eDeletedRecently);
    expectKept("webhook_deliveries", g4);

    // Many more than a batch: 23 events delivered 45 days ago, and 9 consent links expired 40 days ago.
    for (let i = 0; i < 23; i++) {
      const e = await event(at(45));
      expectGone("events", e);
      expectGone("webhook_deliveries", await delivery(e, w1.id, { createdAt: at(45), status: "DELIVERED" }));
    }
    for (let i = 0; i < 9; i++) expectGone("consent_links", await consentLinkRow(at(40), null, "PENDING"));
    // A link locked by wrong codes 20 days ago (no decision, its expiry then): kept.
    expectKept("consent_links", await consentLinkRow(at(20), null, "LOCKED"));

    // Production loans, long over (repaid a year ago; cancelled): the books of real money, kept.
    const pu = await createUser(t, { environment: "production" });
    for (const [s, deliveredAt] of [
      ["DELIVERED", at(400)],
      ["CANCELLED", null],
    ] as const) {
      const id = newId("dsb");
      await q(
        `insert into disbursements (id, partner_id, environment, user_id, status, principal_kobo, fee_kobo,
                                    fee_rate_bps, destination, reference, provider, created_at, delivered_at, cancelled_at)
         values ($1, $2, 'production', $3, $4, 100000, 1500, 150, 'BANK', $1, 'paystack', $5, $6, $7)`,
        [id, p1.partnerId, pu.userId, s, at(401), deliveredAt, s === "CANCELLED" ? at(400) : null],
      );
      const inst = `rpy_${id.slice(4)}`;
      await q(
        `insert into installments (id, disbursement_id, seq, due_date, amount_kobo, status, attempts, collected_at)
         values ($1, $2, 1, $3, 100000, $4, $5, $6)`,
        [
          inst,
          id,
          at(380).toISOString().slice(0, 10),
          s === "DELIVERED" ? "COLLECTED" : "CANCELLED",
          s === "DELIVERED" ? 1 : 0,
          s === "DELIVERED" ? at(380) : null,
        ],
      );
      if (s === "DELIVERED") {
        await q(
          `insert into book_entries (partner_id, environment, disbursement_id, installment_id, kind, amount_kobo, booked_at)
           values ($1, 'production', $2, null, 'PRINCIPAL_OUT', -100000, $3),
                  ($1, 'production', $2, $4, 'REPAYMENT_IN', 100000, $5)`,
          [p1.partnerId, id, at(400), inst, at(380)],
        );
      }
      expectKept("disbursements", id);
    }

    // The simulator's records of loans that are gone (a sandbox reset takes the loans, not these): past the
    // sandbox's 90 days they go, a recent one stays, and an old record of a loan still being repaid stays.
    await q(
      `insert into sandbox_transfers (reference, amount_kobo, status, created_at)
       values ($1, 100000, 'SUCCESS', $3), ($2, 100000, 'SUCCESS', $4)`,
      [orphanTransfer, recentOrphanTransfer, at(100), at(10)],
    );
    await q(
      "insert into sandbox_debits (reference, amount_kobo, status, created_at) values ($1, 100000, 'SUCCESS', $2)",
      [`${orphanInstallment}:1`, at(100)],
    );
    await q(
      `insert into sandbox_refunds (reference, charge_reference, amount_kobo, status, created_at)
       values ($1, $2, 100000, 'SUCCESS', $3)`,
      [`rfd_${orphanInstallment.slice(4)}`, `${orphanInstallment}:1`, at(100)],
    );
    await q("update sandbox_transfers set created_at = $2 where reference = $1", [repaying, at(100)]);
    liveOldTransfer = repaying;

    // What hangs on the sandbox loans to purge, as it is before the run.
    const doomed = gone.disbursements as string[];
    const counted = async (text: string) => (await q<{ n: number }>(text, [doomed]))[0]?.n ?? 0;
    hanging.installments = await counted(
      "select count(*)::int as n from installments where disbursement_id = any($1::text[])",
    );
    hanging.book_entries = await counted(
      "select count(*)::int as n from book_entries where disbursement_id = any($1::text[])",
    );
    hanging.sandbox_transfers = await counted(
      "select count(*)::int as n from sandbox_transfers where reference = any($1::text[])",
    );
    hanging.sandbox_debits = await counted(
      `select count(*)::int as n from sandbox_debits d join installments i on d.reference like i.id || ':%'
        where i.disbursement_id = any($1::text[])`,
    );
    hanging.sandbox_refunds = await counted(
      `select count(*)::int as n from sandbox_refunds r join installments i on r.reference = i.refund_reference
        where i.disbursement_id = any($1::text[])`,
    );
    fixtureLoans = (
      await q<{ n: number }>("select count(*)::int as n from disbursements where partner_id = $1", [
        FIXTURE_LENDER_ID,
      ])
    )[0]?.n as number;

    report = (await t.app.runJob("retention.purge", {})) as PurgeReport;
  }, 120_000);

  const table = {
    events: "events",
    webhook_deliveries: "webhook_deliveries",
    webhooks: "webhooks",
    consent_links: "consent_links",
    disbursements: "disbursements",
  } as const;

  it.each(Object.keys(table))("removes exactly the %s past retention, and keeps the rest", async (name) => {
    const want = [...(gone[name] ?? []), ...(kept[name] ?? [])];
    const left = await ids(`select id from ${name} where id = any($1::text[])`, [want]);
    expect(left).toEqual([...(kept[name] ?? [])].sort());
    expect(gone[name]?.length).toBeGreaterThan(0);
  });

  it("takes the attempts of the deliveries it removes, and leaves those of the deliveries it keeps", async () => {
    const of = async (deliveries: string[]) =>
      (
        await q<{ n: number }>(
          "select count(*)::int as n from webhook_attempts where delivery_id = any($1::text[])",
          [deliveries],
        )
      )[0]?.n;
    expect(await of(gone.webhook_deliveries as string[])).toBe(0);
    expect(await of(kept.webhook_deliveries as string[])).toBe(kept.webhook_deliveries?.length);
  });

  it("takes a sandbox loan's installments, sandbox books and simulator records, and nothing of the loans it keeps", async () => {
    expect(hanging.installments).toBe(5);
    expect(hanging.book_entries).toBeGreaterThanOrEqual(9);
    expect(hanging.sandbox_transfers).toBe(3);
    expect(hanging.sandbox_debits).toBeGreaterThanOrEqual(2);
    expect(hanging.sandbox_refunds).toBe(1);
    const doomed = gone.disbursements as string[];
    const left = await q<{ n: number }>(
      `select (select count(*) from installments where disbursement_id = any($1::text[]))
            + (select count(*) from book_entries where disbursement_id = any($1::text[]))
            + (select count(*) from sandbox_transfers where reference = any($1::text[]))
            + (select count(*) from sandbox_debits where split_part(reference, ':', 1) like 'rpy_%'
                 and not exists (select 1 from installments i where i.id = split_part(reference, ':', 1)))
            + (select count(*) from sandbox_refunds) as n`,
      [doomed],
    );
    expect(Number(left[0]?.n)).toBe(0);
    const keptLoans = kept.disbursements as string[];
    const still = await q<{ installments: number; books: number; transfers: number }>(
      `select (select count(*)::int from installments where disbursement_id = any($1::text[])) as installments,
              (select count(*)::int from book_entries where disbursement_id = any($1::text[])) as books,
              (select count(*)::int from sandbox_transfers where reference = any($1::text[])) as transfers`,
      [keptLoans],
    );
    // Installments: one each (the two production loans, the loan being repaid, the recent failure); the
    // production books (2) and the repaying loan's (principal and fee); two transfers by the simulator.
    expect(still[0]).toEqual({ installments: 4, books: 4, transfers: 2 });
    const fixtures = await q<{ n: number }>(
      "select count(*)::int as n from disbursements where partner_id = $1",
      [FIXTURE_LENDER_ID],
    );
    expect(fixtures[0]?.n).toBe(fixtureLoans);
    // Of the records of loans already gone, only the recent one is left; the old record of a live loan stays.
    expect(
      await ids("select reference as id from sandbox_transfers where reference = any($1::text[])", [
        [orphanTransfer, recentOrphanTransfer, liveOldTransfer],
      ]),
    ).toEqual([recentOrphanTransfer, liveOldTransfer].sort());
    expect(
      await q("select 1 from sandbox_debits where reference like $1", [`${orphanInstallment}:%`]),
    ).toHaveLength(0);
    expect(fixtureLoans).toBeGreaterThan(0);
  });

  it("recomputes the repayment history of the borrowers whose loans it removed: a sandbox partner's history is of the loans it still has", async () => {
    const rows = await q<{ user_id: string; loans_taken: number; actual: number }>(
      `select h.user_id, h.loans_taken,
              (select count(*)::int from disbursements d
                where d.user_id = h.user_id and d.partner_id = $1 and d.status = 'DELIVERED') as actual
         from repayment_histories h where h.lender_scope = $1`,
      [p2.partnerId],
    );
    for (const r of rows) expect(r.loans_taken, r.user_id).toBe(r.actual);
    // The repaid loan's borrower had one loan in their history; it went with the loan.
    expect(rows.filter((r) => r.loans_taken === 0).length).toBeGreaterThanOrEqual(1);
    expect(rows.filter((r) => r.loans_taken === 1).length).toBeGreaterThanOrEqual(1);
  });

  it("counts what it removed in retention_purged_rows_total, by table", async () => {
    const after = await purged();
    const delta = Object.fromEntries(
      PURGED_TABLES.map((name) => [name, (after[name] ?? 0) - (before[name] ?? 0)]),
    );
    expect(delta).toEqual({
      events: gone.events?.length,
      webhook_deliveries: gone.webhook_deliveries?.length,
      // Two attempts of the delivery of 31 days ago, one of every other delivery removed.
      webhook_attempts: (gone.webhook_deliveries?.length ?? 0) + 1,
      webhooks: 1,
      consent_links: gone.consent_links?.length,
      disbursements: 4,
      installments: hanging.installments,
      book_entries: hanging.book_entries,
      // With the records of loans already gone: one of each.
      sandbox_transfers: (hanging.sandbox_transfers ?? 0) + 1,
      sandbox_debits: (hanging.sandbox_debits ?? 0) + 1,
      sandbox_refunds: (hanging.sandbox_refunds ?? 0) + 1,
      // Sandbox partners' ledger lines are kept 400 days: none are that old here.
      ledger_entries: 0,
      ledger_daily: 0,
      ledger_counterparties: 0,
      ledger_counterparty_days: 0,
      // No portal people here (test/e2e/portal.test.ts purges theirs).
      portal_sessions: 0,
      portal_invites: 0,
      portal_audit_events: 0,
      portal_signin_throttles: 0,
      // No sign-ins here.
      rate_limit_buckets: 0,
      // The request log drops whole days, past its own 30 days (test/e2e/request-log.test.ts).
      request_log: 0,
    });
    const res = await fetch(`${t.internalUrl}/metrics`, {
      headers: { authorization: `Bearer ${t.internalToken}` },
    });
    const text = await res.text();
    expect(text).toContain(`retention_purged_rows_total{table="events"} ${after.events}`);
    // The label set is fixed: every table, and nothing else.
    const labels = [...text.matchAll(/^retention_purged_rows_total\{table="([^"]+)"\}/gm)].map((m) => m[1]);
    expect(labels.sort()).toEqual([...PURGED_TABLES].sort());
  });

  it("works in batches of at most RETENTION_BATCH_SIZE rows, each its own transaction, until nothing is left", async () => {
    // 26 events at 4 a batch: at least 7 batches, and one more that finds nothing.
    expect(report.events?.batches).toBeGreaterThanOrEqual(Math.ceil((gone.events?.length ?? 0) / BATCH) + 1);
    expect(report["consent links"]?.batches).toBeGreaterThanOrEqual(
      Math.ceil((gone.consent_links?.length ?? 0) / BATCH) + 1,
    );
    // A deleted webhook's replay chain goes a link per batch (replays first).
    expect(report["deleted webhooks' deliveries"]?.batches).toBe(CHAIN + 1);
    // Sandbox loans: a tenth of the batch size, so one loan per batch here.
    expect(report["sandbox disbursements"]?.batches).toBe(5);
    // A second run finds nothing left to remove.
    const again = (await t.app.runJob("retention.purge", {})) as PurgeReport;
    for (const step of Object.values(again)) expect(step.deleted).toEqual({});
  });
});

describe("the ledger lines of sandbox partners' collections and refunds", () => {
  it("go once older than any snapshot window (400 days), with their roll-ups; the platform's own ledger stays", async () => {
    const user = "usr_sandboxTrusted";
    const partner = await createPartner(t);
    const line = async (daysAgo: number, scope: string) => {
      const id = `test-line:${newId("evt")}`;
      const when = at(daysAgo);
      const dayOf = when.toISOString().slice(0, 10);
      const hash = randomBytes(32);
      await q(
        `insert into ledger_entries (id, user_id, amount_kobo, direction, counterparty_hash, channel, occurred_at, day, scope)
         values ($1, $2, 100, 'OUT', $3, 'other', $4, $5, $6)`,
        [id, user, hash, when, dayOf, scope],
      );
      await q(
        `insert into ledger_daily (user_id, day, scope, outflow_kobo, outflow_count) values ($1, $2, $3, 100, 1)
         on conflict (user_id, day, scope) do update set outflow_kobo = ledger_daily.outflow_kobo + 100`,
        [user, dayOf, scope],
      );
      await q(
        `insert into ledger_counterparties (user_id, direction, counterparty_hash, scope, first_day, last_day)
         values ($1, 'OUT', $2, $3, $4, $4)`,
        [user, hash, scope, dayOf],
      );
      await q(
        `insert into ledger_counterparty_days (user_id, direction, scope, last_day, parties) values ($1, 'OUT', $2, $3, 1)
         on conflict (user_id, direction, scope, last_day) do update set parties = ledger_counterparty_days.parties + 1`,
        [user, scope, dayOf],
      );
      return id;
    };
    const old = await line(401, partner.partnerId);
    const recent = await line(399, partner.partnerId);
    const platform = await line(500, "");
    const before = await purged();
    const report = (await t.app.runJob("retention.purge", {})) as PurgeReport;
    expect(report["sandbox ledger lines"]?.deleted).toEqual({
      ledger_entries: 1,
      ledger_daily: 1,
      ledger_counterparties: 1,
      ledger_counterparty_days: 1,
    });
    expect(
      await ids("select id from ledger_entries where id = any($1::text[])", [[old, recent, platform]]),
    ).toEqual([recent, platform].sort());
    const days = await q<{ day: string; scope: string }>(
      "select day::text, scope from ledger_daily where user_id = $1 and day = any($2::date[]) order by day",
      [user, [401, 399, 500].map((n) => at(n).toISOString().slice(0, 10))],
    );
    expect(days.map((d) => (d.scope === "" ? "platform" : d.scope))).toEqual(["platform", partner.partnerId]);
    const after = await purged();
    expect((after.ledger_entries ?? 0) - (before.ledger_entries ?? 0)).toBe(1);
  });
});

describe("what pg-boss keeps", () => {
  it("every queue states how long its jobs are kept: finished ones at most a week, waiting ones 14 days past their start", async () => {
    const queues = await q<{ name: string; deletion_seconds: number; retention_seconds: number }>(
      "select name, deletion_seconds, retention_seconds from pgboss.queue order by name",
    );
    expect(queues.map((r) => r.name).sort()).toEqual(
      [...Object.keys(queueOptions), PG_BOSS_CRON_QUEUE].sort(),
    );
    for (const r of queues) {
      expect(r.deletion_seconds, r.name).toBeGreaterThan(0);
      expect(r.deletion_seconds, r.name).toBeLessThanOrEqual(7 * 86_400);
      expect(r.retention_seconds, r.name).toBe(14 * 86_400);
    }
  });
});

describe("no job is scheduled past the longest allowed tenor", () => {
  it("refuses a tenor past the ceiling, in the service and in the database", async () => {
    await expect(
      t.app.services.partners.setTerms(em(), p2.partnerId, 5_000, MAX_TENOR_DAYS_CEILING + 1),
    ).rejects.toMatchObject({
      code: "validation_failed",
      details: { fields: { maxTenorDays: expect.any(String) } },
    });
    await expect(
      t.internal.partners.setPartnerTerms({
        partnerId: p2.partnerId,
        maxCostBps: 5_000,
        maxTenorDays: MAX_TENOR_DAYS_CEILING + 1,
      }),
    ).rejects.toThrow();
    await expect(
      q("update partners set max_tenor_days = $2 where id = $1", [p2.partnerId, MAX_TENOR_DAYS_CEILING + 1]),
    ).rejects.toThrow(/partners_max_tenor_days_check/);
  });

  it("at the ceiling, queues the last debit no further ahead than it", async () => {
    clock.set(T0);
    await t.internal.partners.setPartnerTerms({
      partnerId: p2.partnerId,
      maxCostBps: 5_000,
      maxTenorDays: MAX_TENOR_DAYS_CEILING,
    });
    try {
      const far = await createDisbursement("far_schedule", [MAX_TENOR_DAYS_CEILING + 5]);
      expect(far.status).toBe(422);
      expect(Object.keys(far.body.details.fields)).toEqual(["repaymentSchedule.installments[0].dueDate"]);
      const id = await disbursement("long_tenor", [30, MAX_TENOR_DAYS_CEILING - 2]);
      await acceptMandate(t, p2.sandboxKey, id);
      const [latest] = await q<{ start_after: Date }>(
        `select max(start_after) as start_after from pgboss.job where name = 'repayments.collect'`,
      );
      const limit = T0 + (MAX_TENOR_DAYS_CEILING + 1) * ms.day;
      expect(new Date(latest?.start_after as Date).getTime()).toBeGreaterThan(
        T0 + (MAX_TENOR_DAYS_CEILING - 3) * ms.day,
      );
      expect(new Date(latest?.start_after as Date).getTime()).toBeLessThanOrEqual(limit);
    } finally {
      await t.internal.partners.setPartnerTerms({
        partnerId: p2.partnerId,
        maxCostBps: 5_000,
        maxTenorDays: 365,
      });
    }
  });
});
