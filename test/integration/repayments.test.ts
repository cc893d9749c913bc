import { randomInt } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { feeKobo } from "../../src/disbursements/fee.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { addDays, lagosDay } from "../../src/platform/dates.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { newId } from "../../src/platform/ids.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { acceptMandate } from "../support/mandates.ts";
import { eventually } from "../support/wait.ts";

const clock = new ManualClock(Date.now());
let t: TestApp;
let p: PartnerFixture;

beforeAll(async () => {
  t = await startTestApp({
    clock,
    config: {
      rateLimits: {
        read: { capacity: 1000, refillPerSecond: 1000 },
        write: { capacity: 1000, refillPerSecond: 1000 },
      },
    },
  });
  p = await createPartner(t);
  // Events are kept only when someone subscribes to them.
  await createWebhook(t.partnerUrl, p.sandboxKey, {
    url: "http://127.0.0.1:9/hooks",
    events: ["REPAYMENT_*"],
  });
});
afterAll(() => t?.stop());

/** A Lagos day from the clock's (due dates are Lagos days: the first may be tomorrow in Lagos, CONTRACT.md §6). */
const dayOf = (offset: number) => addDays(lagosDay(clock.now()), offset);
/** A UTC day from the clock's (snapshots count days past due in UTC days). */
const utcDayOf = (offset: number) =>
  new Date(clock.now().getTime() + offset * ms.day).toISOString().slice(0, 10);
const debitTime = (date: string) => new Date(`${date}T07:00:00Z`);

async function disburse(reference: string, principal: bigint, installments: [number, bigint][]) {
  const u = await createUser(t);
  await t.internal.consents.grantConsent({
    userId: u.userId,
    partnerId: p.partnerId,
    scopes: ["ledger"],
    ledgerWindowDays: 30,
  });
  const res = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
    key: p.sandboxKey,
    headers: { "idempotency-key": `idem-${reference}` },
    body: {
      userId: u.userId,
      principalKobo: principal.toString(),
      destination: "BANK",
      reference,
      repaymentSchedule: {
        installments: installments.map(([d, a]) => ({ dueDate: dayOf(d), amountKobo: a.toString() })),
      },
      scheduleAcceptedAt: clock.now().toISOString(),
    },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  await acceptMandate(t, p.sandboxKey, res.body.id);
  await eventually(
    async () =>
      (await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${res.body.id}`, { key: p.sandboxKey }))
        .body.status === "DELIVERED",
  );
  return { id: res.body.id as string, userId: u.userId };
}
const repayments = async (id: string) =>
  (await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${id}/repayments`, { key: p.sandboxKey })).body
    .repayments;
const events = async (type: string, disbursementId: string) =>
  (
    await sql<{ body: string }>(
      t.app.orm.em.fork(),
      "select body from events where type = $1 and body like $2 order by id",
      [type, `%${disbursementId}%`],
    )
  ).map((e) => JSON.parse(e.body).payload);

describe("repayments", () => {
  it("collects an installment once its due date passes, books it on both sides and reports it, even after the data consent is revoked", async () => {
    const d = await disburse("rp-1", 1_000_000n, [
      [1, 550_000n],
      [2, 550_000n],
    ]);
    const [first] = await repayments(d.id);
    expect(first).toMatchObject({
      seq: 1,
      status: "SCHEDULED",
      amountKobo: "550000",
      attempts: 0,
      nextAttemptAt: debitTime(dayOf(1)).toISOString(),
    });
    // Data consent and debit authority are separate.
    const consent = (
      await rest(t.partnerUrl, "GET", `/partner/v1/users/${d.userId}/consent`, { key: p.sandboxKey })
    ).body;
    await rest(t.partnerUrl, "POST", `/partner/v1/consents/${consent.id}/revoke`, {
      key: p.sandboxKey,
      body: {},
    });

    clock.set(debitTime(dayOf(1)).getTime() - 1);
    await t.app.services.repayments.collectDue(t.app.orm.em.fork());
    expect((await repayments(d.id))[0].status).toBe("SCHEDULED");
    clock.advance(1);
    await t.app.services.repayments.collectDue(t.app.orm.em.fork());
    const [collected, second] = await repayments(d.id);
    expect(collected).toMatchObject({ status: "COLLECTED", attempts: 1, collectedAt: expect.any(String) });
    expect(second.status).toBe("SCHEDULED");
    const books = await sql<{ kind: string; amount_kobo: string }>(
      t.app.orm.em.fork(),
      "select kind, amount_kobo::text from book_entries where disbursement_id = $1 and kind = 'REPAYMENT_IN'",
      [d.id],
    );
    expect(books).toEqual([{ kind: "REPAYMENT_IN", amount_kobo: "550000" }]);
    const ledger = await sql<{ outflow_kobo: string; outflow_count: number }>(
      t.app.orm.em.fork(),
      "select outflow_kobo::text, outflow_count from ledger_daily where user_id = $1",
      [d.userId],
    );
    expect(ledger).toEqual([{ outflow_kobo: "550000", outflow_count: 1 }]);
    expect(await events("REPAYMENT_COLLECTED", d.id)).toEqual([
      expect.objectContaining({ repaymentId: collected.id, amountKobo: "550000" }),
    ]);
    // Collecting again changes nothing.
    await t.app.services.repayments.collect(t.app.orm.em.fork(), collected.id);
    expect(await events("REPAYMENT_COLLECTED", d.id)).toHaveLength(1);
  });

  it("retries a failing debit daily, three times, then reports it failed", async () => {
    const d = await disburse("rp-2_debit_fail", 200_000n, [[1, 210_000n]]);
    clock.set(debitTime(dayOf(1)));
    for (let attempt = 1; attempt <= 4; attempt++) {
      await t.app.services.repayments.collectDue(t.app.orm.em.fork());
      const [r] = await repayments(d.id);
      expect(r).toMatchObject({
        attempts: attempt,
        lastFailure: "insufficient_funds",
        status: attempt < 4 ? "SCHEDULED" : "FAILED",
      });
      clock.advance(ms.day);
    }
    await t.app.services.repayments.collectDue(t.app.orm.em.fork());
    expect((await repayments(d.id))[0].attempts).toBe(4);
    const failed = await events("REPAYMENT_FAILED", d.id);
    expect(failed.map((f) => [f.attempt, f.willRetry])).toEqual([
      [1, true],
      [2, true],
      [3, true],
      [4, false],
    ]);
  });

  it("shows the repayment history in snapshots, naming no lender; another sandbox partner sees none of it", async () => {
    const d = await disburse("rp-history", 300_000n, [
      [1, 160_000n],
      [3, 160_000n],
    ]);
    const other = await createPartner(t);
    for (const partnerId of [p.partnerId, other.partnerId])
      await t.internal.consents.grantConsent({
        userId: d.userId,
        partnerId,
        scopes: ["repayment_history"],
        ledgerWindowDays: 30,
      });
    clock.set(debitTime(dayOf(1)));
    await t.app.services.repayments.collectDue(t.app.orm.em.fork());
    const snapshot = async (key: string) =>
      (await rest(t.partnerUrl, "GET", `/partner/v1/users/${d.userId}/snapshot`, { key })).body;
    const own = await snapshot(p.sandboxKey);
    expect(own.repaymentHistory).toEqual({
      loansTaken: 1,
      loansRepaid: 0,
      loansActive: 1,
      totalBorrowedKobo: "300000",
      totalRepaidKobo: "160000",
      onTimeRateBps: 10_000,
      maxDaysPastDue: 0,
      lastRepaymentAt: debitTime(dayOf(0)).toISOString(),
    });
    expect(JSON.stringify(own)).not.toContain(p.partnerId);
    expect(JSON.stringify(own)).not.toContain("rp-history");
    // Sandbox partners are isolated: one partner's loans are not another's repayment history.
    expect((await snapshot(other.sandboxKey)).repaymentHistory).toBeUndefined();
  });

  it("spans every lender in production, from roll-ups kept at settlement (late, missed and cancelled too)", async () => {
    const u = await createUser(t, { environment: "production" });
    const lenders = [await createPartner(t), await createPartner(t)];
    const em = t.app.orm.em.fork();
    const day = (n: number) => utcDayOf(n);
    // Lender 0: repaid, the second installment 2 days late. Lender 1: one collected on time, one 5 days
    // overdue and still owed, one cancelled past due, one not yet due.
    const loans: [number, string, [number, string, string | null][]][] = [
      [
        0,
        "DELIVERED",
        [
          [-20, "COLLECTED", day(-20)],
          [-10, "COLLECTED", day(-8)],
        ],
      ],
      [
        1,
        "DELIVERED",
        [
          [-9, "COLLECTED", day(-9)],
          [-5, "FAILED", null],
          [-3, "CANCELLED", null],
          [4, "SCHEDULED", null],
        ],
      ],
      [1, "FAILED", [[2, "CANCELLED", null]]],
    ];
    for (const [lender, status, installments] of loans) {
      const id = newId("dsb");
      await sql(
        em,
        `insert into disbursements (id, partner_id, environment, user_id, status, principal_kobo, fee_kobo, fee_rate_bps,
                                    destination, reference, schedule_accepted_at, provider, created_at)
         values ($1, $2, 'production', $3, $4, 100000, 0, 0, 'WALLET', $1, now(), 'paystack', now())`,
        [id, lenders[lender]?.partnerId, u.userId, status],
      );
      for (const [seq, [due, st, collected]] of installments.entries())
        await sql(
          em,
          `insert into installments (id, disbursement_id, seq, due_date, amount_kobo, status, collected_at)
           values ($1, $2, $3, $4, 50000, $5, $6)`,
          [`rpy_${id.slice(4)}_${seq + 1}`, id, seq + 1, day(due), st, collected && `${collected}T12:00:00Z`],
        );
    }
    await em.transactional((tx) =>
      t.app.services.disbursements.refreshHistory(tx, {
        userId: u.userId,
        environment: "production",
        partnerId: "",
      }),
    );
    const reader = lenders[1] as PartnerFixture;
    await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: reader.partnerId,
      scopes: ["repayment_history"],
      ledgerWindowDays: 30,
    });
    const snap = (
      await rest(t.partnerUrl, "GET", `/partner/v1/users/${u.userId}/snapshot`, { key: reader.liveKey })
    ).body;
    expect(snap.repaymentHistory).toEqual({
      loansTaken: 2,
      loansRepaid: 1,
      loansActive: 1,
      totalBorrowedKobo: "200000",
      totalRepaidKobo: "150000",
      // Due so far: 3 collected, the overdue one and the cancelled one; on time: 2 of them.
      onTimeRateBps: 4_000,
      // The overdue installment, 5 days past due and counting.
      maxDaysPastDue: 5,
      lastRepaymentAt: `${day(-8)}T12:00:00.000Z`,
    });
  });

  it("keeps the partner's books balanced over random disbursements", async () => {
    clock.set(Date.now());
    const before = (await rest(t.partnerUrl, "GET", "/partner/v1/books", { key: p.sandboxKey })).body;
    let principal = 0n;
    let fees = 0n;
    let repaid = 0n;
    const made: string[] = [];
    for (let i = 0; i < 6; i++) {
      const amount = BigInt(randomInt(1_000, 50_000_000));
      const d = await disburse(`rp-books-${i}-${randomInt(1e9)}`, amount, [
        [1, amount / 2n + 1n],
        [2, amount / 2n + 7n],
      ]);
      made.push(d.id);
      principal += amount;
      fees += feeKobo(amount, 150);
    }
    clock.set(debitTime(dayOf(1)));
    await t.app.services.repayments.collectDue(t.app.orm.em.fork());
    for (const id of made) repaid += BigInt((await repayments(id))[0].amountKobo);
    const after = (await rest(t.partnerUrl, "GET", "/partner/v1/books", { key: p.sandboxKey })).body;
    expect(BigInt(after.principalOutKobo) - BigInt(before.principalOutKobo)).toBe(-principal);
    expect(BigInt(after.feesKobo) - BigInt(before.feesKobo)).toBe(-fees);
    expect(BigInt(after.repaymentsInKobo) - BigInt(before.repaymentsInKobo)).toBe(repaid);
    expect(BigInt(after.netKobo)).toBe(
      BigInt(after.principalOutKobo) + BigInt(after.feesKobo) + BigInt(after.repaymentsInKobo),
    );
    const sum = after.entries.reduce((s: bigint, e: { amountKobo: string }) => s + BigInt(e.amountKobo), 0n);
    expect(sum).toBe(BigInt(after.netKobo));
  });
});
