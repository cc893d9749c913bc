import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PAYSTACK_WEBHOOK_PATH } from "../../src/disbursements/provider-webhooks.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartner } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { type FakePaystack, startFakePaystack } from "../support/fake-paystack.ts";
import { unusedSmsProvider } from "../support/fake-sms.ts";
import { acceptMandate } from "../support/mandates.ts";
import { eventually } from "../support/wait.ts";

// A payout reversed after collections owes the collected repayments back (CONTRACT.md §6): in the sandbox
// through the simulator, in production through the provider's HTTP API (a local server speaking it).
const clock = new ManualClock(Date.now());
let t: TestApp;
let fake: FakePaystack;

beforeAll(async () => {
  fake = await startFakePaystack();
  t = await startTestApp({
    clock,
    config: {
      paymentProvider: { baseUrl: fake.url, secretKey: fake.secretKey, timeoutMs: 5_000 },
      smsProvider: unusedSmsProvider,
    },
  });
  // Debits and sweeps here are driven by the test, on its clock: the minute sweeps would race it.
  await t.app.boss.unschedule("repayments.sweep");
  await t.app.boss.unschedule("refunds.sweep");
});
afterAll(async () => {
  await t?.stop();
  await fake?.close();
});

const day = (n: number) => new Date(clock.now().getTime() + n * ms.day).toISOString().slice(0, 10);
const em = () => t.app.orm.em.fork();
type Repayment = {
  id: string;
  status: string;
  amountKobo: string;
  refund?: { status: string; amountKobo: string; refundedAt: string; failureReason: string } | null;
};

/** A fresh partner, a consented user (with instruments in production) and a disbursement, DELIVERED. */
async function delivered(environment: "sandbox" | "production", reference: string) {
  const p = await createPartner(t);
  const key = environment === "sandbox" ? p.sandboxKey : p.liveKey;
  const u = await createUser(t, { environment });
  if (environment === "production")
    await t.internal.users.setPaymentInstruments({
      userId: u.userId,
      bankRecipientCode: "RCP_refund01",
      debitAuthorizationCode: "AUTH_refund1",
      debitEmail: "refund@example.com",
    });
  await t.internal.consents.grantConsent({
    userId: u.userId,
    partnerId: p.partnerId,
    scopes: ["standing"],
    ledgerWindowDays: 30,
  });
  const res = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
    key,
    headers: { "idempotency-key": `idem-${reference}` },
    body: {
      userId: u.userId,
      principalKobo: "5000000",
      destination: "BANK",
      reference,
      repaymentSchedule: {
        installments: [
          { dueDate: day(30), amountKobo: "2700000" },
          { dueDate: day(60), amountKobo: "2700000" },
        ],
      },
    },
  });
  expect(res.status).toBe(200);
  const id = res.body.id as string;
  await acceptMandate(t, key, id);
  await eventually(
    async () =>
      (await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${id}`, { key })).body.status ===
      "DELIVERED",
    { what: `${id} DELIVERED` },
  );
  const list = async (): Promise<Repayment[]> =>
    (await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${id}/repayments`, { key })).body.repayments;
  const [first] = await list();
  if (!first) throw new Error("no repayment");
  const [due] = await sql<{ next_attempt_at: Date }>(
    em(),
    "select next_attempt_at from installments where id = $1",
    [first.id],
  );
  return { p, key, userId: u.userId, id, first: first.id, dueAt: due?.next_attempt_at as Date, list };
}

/** The disbursement's book entries, by kind, and their sum. */
async function booksOf(key: string, id: string) {
  const books = await rest(t.partnerUrl, "GET", "/partner/v1/books", { key });
  expect(books.status).toBe(200);
  const entries = (
    books.body.entries as { kind: string; amountKobo: string; disbursementId: string }[]
  ).filter((e) => e.disbursementId === id);
  return {
    body: books.body,
    kinds: entries.map((e) => `${e.kind} ${e.amountKobo}`).sort(),
    sum: entries.reduce((s, e) => s + BigInt(e.amountKobo), 0n),
  };
}

const refundOf = async (list: () => Promise<Repayment[]>, status: string) =>
  eventually(
    async () => {
      const rows = await list();
      return rows[0]?.refund?.status === status ? rows : undefined;
    },
    { what: `refund ${status}` },
  );
const ledgerEntry = (installmentId: string) =>
  sql<{ direction: string; amount_kobo: string; user_id: string }>(
    em(),
    "select direction, amount_kobo::text, user_id from ledger_entries where id = $1",
    [`refund:${installmentId}`],
  );
const webhookUrl = () => `${t.partnerUrl}${PAYSTACK_WEBHOOK_PATH}`;

describe("a payout reversed after a collection, in the sandbox", () => {
  it("refunds the collected repayment once, books it, writes the user's ledger, cancels the rest; the books balance", async () => {
    const d = await delivered("sandbox", "refund-sbx-1");
    const collected = await rest(t.partnerUrl, "POST", `/partner/v1/sandbox/repayments/${d.first}/collect`, {
      key: d.key,
      body: { outcome: "SUCCESS" },
    });
    expect(collected.status).toBe(200);
    expect(collected.body.status).toBe("COLLECTED");
    const reversed = await rest(t.partnerUrl, "POST", `/partner/v1/sandbox/disbursements/${d.id}/reverse`, {
      key: d.key,
    });
    expect(reversed.status).toBe(200);

    const rows = await refundOf(d.list, "REFUNDED");
    expect(rows[0]).toMatchObject({
      status: "COLLECTED",
      refund: {
        status: "REFUNDED",
        amountKobo: "2700000",
        refundedAt: expect.any(String),
        failureReason: "",
      },
    });
    expect(rows[1]?.status).toBe("CANCELLED");
    expect(rows[1]?.refund ?? null).toBeNull();

    const books = await booksOf(d.key, d.id);
    expect(books.kinds).toEqual([
      "FEE -75000",
      "FEE_REVERSED 75000",
      "PRINCIPAL_OUT -5000000",
      "PRINCIPAL_REVERSED 5000000",
      "REPAYMENT_IN 2700000",
      "REPAYMENT_REFUND -2700000",
    ]);
    expect(books.sum).toBe(0n);
    expect(books.body).toMatchObject({ refundsKobo: "-2700000", repaymentsInKobo: "2700000", netKobo: "0" });
    expect(await ledgerEntry(d.first)).toEqual([
      { direction: "IN", amount_kobo: "2700000", user_id: d.userId },
    ]);
    const simulated = await sql(em(), "select status from sandbox_refunds where charge_reference = $1", [
      `${d.first}:1`,
    ]);
    expect(simulated).toEqual([{ status: "SUCCESS" }]);

    // Hearing it again changes nothing: the job finds nothing owed, a second settlement nothing to settle.
    expect(await t.app.services.refunds.refund(em(), d.first)).toBe("NOT_DUE");
    expect(await t.app.services.refunds.settle(em(), d.first, { status: "SUCCESS" })).toBe("REFUNDED");
    expect((await booksOf(d.key, d.id)).kinds).toHaveLength(6);
    const again = await rest(t.partnerUrl, "POST", `/partner/v1/sandbox/disbursements/${d.id}/reverse`, {
      key: d.key,
    });
    expect(again.status).toBe(409);
    expect(
      await sql(em(), "select 1 from sandbox_refunds where charge_reference like $1", [`${d.first}:%`]),
    ).toHaveLength(1);
  });

  it("owes nothing when nothing was collected", async () => {
    const d = await delivered("sandbox", "refund-sbx-2");
    await rest(t.partnerUrl, "POST", `/partner/v1/sandbox/disbursements/${d.id}/reverse`, { key: d.key });
    const rows = await d.list();
    expect(rows.map((r) => [r.status, r.refund ?? null])).toEqual([
      ["CANCELLED", null],
      ["CANCELLED", null],
    ]);
    expect((await booksOf(d.key, d.id)).sum).toBe(0n);
  });
});

describe("a payout reversed after a collection, through the provider's HTTP API", () => {
  /** Collects the first installment on its due date through the fake provider. */
  async function collectFirst(d: Awaited<ReturnType<typeof delivered>>) {
    clock.set(d.dueAt.getTime());
    return t.app.services.repayments.collect(em(), d.first);
  }
  /** The provider reverses the payout and says so by webhook. */
  async function reverse(id: string) {
    const transfer = fake.transfers.get(id);
    if (!transfer) throw new Error("no transfer");
    transfer.status = "reversed";
    expect(await fake.sendWebhook(webhookUrl(), "transfer.reversed", { reference: id })).toBe(200);
  }
  const refundsOf = (chargeReference: string) =>
    [...fake.refunds.values()].filter((r) => r.transactionReference === chargeReference);

  it("refunds the charge that collected it, once (POST /refund), books it and writes the user's ledger", async () => {
    const d = await delivered("production", "refund-live-1");
    expect(await collectFirst(d)).toBe("COLLECTED");
    await reverse(d.id);
    const rows = await refundOf(d.list, "REFUNDED");
    expect(rows.map((r) => r.status)).toEqual(["COLLECTED", "CANCELLED"]);
    const charge = fake.charges.get(`${d.first}:1`);
    expect(refundsOf(`${d.first}:1`)).toEqual([
      expect.objectContaining({ transaction: charge?.id, amount: 2_700_000, status: "processed" }),
    ]);
    expect((await booksOf(d.key, d.id)).sum).toBe(0n);
    expect(await ledgerEntry(d.first)).toHaveLength(1);
    // The provider tells us again: nothing more is refunded or booked.
    await reverse(d.id);
    expect(await t.app.services.refunds.resumeDue(em())).toBe(0);
    expect(refundsOf(`${d.first}:1`)).toHaveLength(1);
    expect((await booksOf(d.key, d.id)).kinds).toHaveLength(6);
  });

  it("a refund whose job was lost is made by the sweep, a minute after it is owed", async () => {
    const d = await delivered("production", "refund-live-lost");
    expect(await collectFirst(d)).toBe("COLLECTED");
    // Reversed, and its refund job lost in the same commit (as a queue restored from an older backup would
    // lose it): the worker, live here, must not get to it first, so the job goes before anything can see it.
    const reversal = { status: "REVERSED" as const, reason: "transfer_reversed" };
    await em().transactional(async (tx) => {
      expect(await t.app.services.disbursements.settlePayout(tx, d.id, reversal)).toBe("REVERSED");
      const lost = await sql(
        tx,
        "delete from pgboss.job where name = 'refunds.refund' and data->>'installmentId' = $1 returning id",
        [d.first],
      );
      expect(lost).toHaveLength(1);
    });
    expect((await d.list())[0]?.refund?.status).toBe("PENDING");
    // Just owed: left to its job (here, none), so the sweep never races a live one.
    expect(await t.app.services.refunds.resumeDue(em())).toBe(0);
    clock.advance(2 * ms.minute);
    expect(await t.app.services.refunds.resumeDue(em())).toBe(1);
    expect((await d.list())[0]?.refund?.status).toBe("REFUNDED");
    expect(refundsOf(`${d.first}:1`)).toHaveLength(1);
    expect((await booksOf(d.key, d.id)).sum).toBe(0n);
  });

  it("a refund the provider has not processed yet waits for its webhook, checked against the provider", async () => {
    const d = await delivered("production", "refund-live-2");
    expect(await collectFirst(d)).toBe("COLLECTED");
    fake.refundStatus = () => "pending";
    try {
      await reverse(d.id);
      const refund = await eventually(() => refundsOf(`${d.first}:1`)[0], { what: "the refund" });
      // The refund job settles the provider's answer (pending): owed still, nothing booked.
      await eventually(async () => {
        const [row] = await sql<{ refund_next_attempt_at: Date | null }>(
          em(),
          "select refund_next_attempt_at from installments where id = $1",
          [d.first],
        );
        return (row?.refund_next_attempt_at?.getTime() ?? 0) > clock.now().getTime() + ms.minute;
      });
      expect((await d.list())[0]?.refund?.status).toBe("PENDING");
      // A webhook the provider does not confirm changes nothing.
      const news = { transaction_reference: `${d.first}:1`, status: "processed" };
      expect(await fake.sendWebhook(webhookUrl(), "refund.processed", news)).toBe(200);
      expect((await d.list())[0]?.refund?.status).toBe("PENDING");
      refund.status = "processed";
      expect(await fake.sendWebhook(webhookUrl(), "refund.processed", news)).toBe(200);
      expect((await d.list())[0]?.refund?.status).toBe("REFUNDED");
      expect(await fake.sendWebhook(webhookUrl(), "refund.processed", news)).toBe(200);
      expect((await booksOf(d.key, d.id)).sum).toBe(0n);
      expect(refundsOf(`${d.first}:1`)).toHaveLength(1);
    } finally {
      fake.refundStatus = () => "processed";
    }
  });

  it("a debit still at the provider when the payout is reversed is refunded once it succeeds", async () => {
    const d = await delivered("production", "refund-live-3");
    fake.chargeStatus = () => ({ status: "ongoing", gatewayResponse: "" });
    try {
      expect(await collectFirst(d)).toBe("SCHEDULED");
    } finally {
      fake.chargeStatus = () => ({ status: "success", gatewayResponse: "Approved" });
    }
    await reverse(d.id);
    // The debit at the provider is left to settle; the rest is cancelled.
    expect((await d.list()).map((r) => r.status)).toEqual(["SCHEDULED", "CANCELLED"]);
    const charge = fake.charges.get(`${d.first}:1`);
    if (!charge) throw new Error("no charge");
    charge.status = "success";
    expect(await fake.sendWebhook(webhookUrl(), "charge.success", { reference: charge.reference })).toBe(200);
    const rows = await refundOf(d.list, "REFUNDED");
    expect(rows[0]?.status).toBe("COLLECTED");
    expect(refundsOf(charge.reference)).toHaveLength(1);
    expect((await booksOf(d.key, d.id)).sum).toBe(0n);
  });

  it("a debit settled while its payout is being reversed is refunded, whichever commits first", async () => {
    for (let n = 0; n < 4; n++) {
      const d = await delivered("production", `refund-live-race-${n}`);
      fake.chargeStatus = () => ({ status: "ongoing", gatewayResponse: "" });
      try {
        expect(await collectFirst(d)).toBe("SCHEDULED");
      } finally {
        fake.chargeStatus = () => ({ status: "success", gatewayResponse: "Approved" });
      }
      const charge = fake.charges.get(`${d.first}:1`);
      const transfer = fake.transfers.get(d.id);
      if (!charge || !transfer) throw new Error("no charge or transfer");
      charge.status = "success";
      transfer.status = "reversed";
      const answers = await Promise.all([
        fake.sendWebhook(webhookUrl(), "charge.success", { reference: charge.reference }),
        fake.sendWebhook(webhookUrl(), "transfer.reversed", { reference: d.id }),
      ]);
      expect(answers).toEqual([200, 200]);
      await refundOf(d.list, "REFUNDED");
      expect(refundsOf(charge.reference)).toHaveLength(1);
      expect((await booksOf(d.key, d.id)).sum).toBe(0n);
    }
  });

  it("a debit still at the provider when the payout is reversed and then declined is cancelled: nothing owed", async () => {
    const d = await delivered("production", "refund-live-4");
    fake.chargeStatus = () => ({ status: "ongoing", gatewayResponse: "" });
    try {
      expect(await collectFirst(d)).toBe("SCHEDULED");
    } finally {
      fake.chargeStatus = () => ({ status: "success", gatewayResponse: "Approved" });
    }
    await reverse(d.id);
    const charge = fake.charges.get(`${d.first}:1`);
    if (!charge) throw new Error("no charge");
    Object.assign(charge, { status: "failed", gatewayResponse: "Insufficient Funds" });
    expect(await fake.sendWebhook(webhookUrl(), "charge.failed", { reference: charge.reference })).toBe(200);
    const rows = await d.list();
    expect(rows.map((r) => [r.status, r.refund ?? null])).toEqual([
      ["CANCELLED", null],
      ["CANCELLED", null],
    ]);
    expect(refundsOf(charge.reference)).toHaveLength(0);
    expect((await booksOf(d.key, d.id)).sum).toBe(0n);
  });

  it("a provider that refunds another amount than asked is never booked", async () => {
    const d = await delivered("production", "refund-live-5");
    expect(await collectFirst(d)).toBe("COLLECTED");
    fake.refundAmount = (asked) => asked - 1;
    try {
      await reverse(d.id);
      await eventually(() => refundsOf(`${d.first}:1`)[0], { what: "the refund" });
      // The job's attempt threw and released its claim (to be asked again), settling nothing.
      await eventually(async () => {
        const [row] = await sql<{ refund_next_attempt_at: Date | null }>(
          em(),
          "select refund_next_attempt_at from installments where id = $1",
          [d.first],
        );
        return row?.refund_next_attempt_at?.getTime() === 0;
      });
      // Asked again, the provider still holds the other amount: never settled, loudly.
      const provider = t.app.services.disbursements.providerFor("production");
      const request = {
        reference: "rfd_x",
        chargeReference: `${d.first}:1`,
        amountKobo: 2_700_000n,
        userId: d.userId,
      };
      await expect(provider.refund(em(), request, { resumed: true })).rejects.toThrow(/differs from ours/);
      expect((await d.list())[0]?.refund?.status).toBe("PENDING");
      expect((await booksOf(d.key, d.id)).kinds).not.toContain("REPAYMENT_REFUND -2700000");
      expect(await ledgerEntry(d.first)).toEqual([]);
      expect(refundsOf(`${d.first}:1`)).toHaveLength(1);
    } finally {
      fake.refundAmount = (asked) => asked;
    }
  });
});
