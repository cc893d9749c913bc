import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PAYSTACK_WEBHOOK_PATH } from "../../src/disbursements/provider-webhooks.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { type FakePaystack, startFakePaystack } from "../support/fake-paystack.ts";
import { unusedSmsProvider } from "../support/fake-sms.ts";
import { acceptMandate } from "../support/mandates.ts";
import { eventually } from "../support/wait.ts";

// Production disbursements through the HTTP adapter, against a local server speaking the provider's API.
const clock = new ManualClock(Date.now());
let t: TestApp;
let p: PartnerFixture;
let fake: FakePaystack;

beforeAll(async () => {
  fake = await startFakePaystack();
  t = await startTestApp({
    clock,
    // The production subscription below (production events are kept only when subscribed to) is on loopback.
    productionLocalWebhooks: true,
    config: {
      paymentProvider: { baseUrl: fake.url, secretKey: fake.secretKey, timeoutMs: 5_000 },
      smsProvider: unusedSmsProvider,
      rateLimits: {
        read: { capacity: 1000, refillPerSecond: 1000 },
        write: { capacity: 1000, refillPerSecond: 1000 },
      },
    },
  });
  // Debits here are driven by the test, on its clock: the minute sweep would race it.
  await t.app.boss.unschedule("repayments.sweep");
  p = await createPartner(t);
  // Events are kept only when someone subscribes to them.
  await createWebhook(t.partnerUrl, p.liveKey, { url: "http://127.0.0.1:9/hooks", events: ["*"] });
});
afterAll(async () => {
  await t?.stop();
  await fake?.close();
});

const day = (n: number) => new Date(clock.now().getTime() + n * ms.day).toISOString().slice(0, 10);
const instruments = {
  bankRecipientCode: "RCP_bank0001",
  walletRecipientCode: "RCP_wallet01",
  debitAuthorizationCode: "AUTH_debit01",
  debitEmail: "user@example.com",
};

async function liveUser(on: Partial<typeof instruments> = instruments) {
  const u = await createUser(t, { environment: "production" });
  await t.internal.users.setPaymentInstruments({ userId: u.userId, ...on });
  await t.internal.consents.grantConsent({
    userId: u.userId,
    partnerId: p.partnerId,
    scopes: ["standing"],
    ledgerWindowDays: 30,
  });
  return u;
}

const create = (
  userId: string,
  reference: string,
  o: { destination?: string; key?: string; idem?: string; accept?: boolean } = {},
) =>
  rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
    key: o.key ?? p.liveKey,
    headers: { "idempotency-key": o.idem ?? `idem-${reference}` },
    body: {
      userId,
      principalKobo: "5000000",
      destination: o.destination ?? "BANK",
      reference,
      repaymentSchedule: {
        installments: [
          { dueDate: day(30), amountKobo: "2700000" },
          { dueDate: day(60), amountKobo: "2700000" },
        ],
      },
      scheduleAcceptedAt: clock.now().toISOString(),
    },
  }).then(async (r) => {
    // The person accepts at once, through the platform's prompt session: what follows is the payout.
    if (r.status === 200 && o.accept !== false) await acceptMandate(t, o.key ?? p.liveKey, r.body.id);
    return r;
  });
const get = async (id: string, key = p.liveKey) =>
  (await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${id}`, { key })).body;
const settled = (id: string, status: string) =>
  eventually(
    async () => {
      const d = await get(id);
      return d.status === status ? d : undefined;
    },
    { what: `${id} ${status}` },
  );
const count = async (text: string, params: unknown[]) =>
  (await sql(t.app.orm.em.fork(), text, params)).length;
const events = (type: string, id: string) =>
  count("select 1 from events where type = $1 and body like $2", [type, `%${id}%`]);
const webhookUrl = () => `${t.partnerUrl}${PAYSTACK_WEBHOOK_PATH}`;

describe("payouts through the provider's HTTP API", () => {
  it("transfers to the user's bank recipient with our id as the reference, once, and never shows the partner the account", async () => {
    const u = await liveUser();
    const res = await create(u.userId, "live-001");
    expect(res.status).toBe(200);
    const done = await settled(res.body.id, "DELIVERED");
    expect(fake.transfers.get(res.body.id)).toMatchObject({
      reference: res.body.id,
      amount: 5_000_000,
      recipient: "RCP_bank0001",
      currency: "NGN",
    });
    expect(JSON.stringify(done)).not.toContain("RCP_");
    expect(await events("DISBURSEMENT_DELIVERED", res.body.id)).toBe(1);
    const wallet = await create(u.userId, "live-002", { destination: "WALLET" });
    await settled(wallet.body.id, "DELIVERED");
    expect(fake.transfers.get(wallet.body.id)?.recipient).toBe("RCP_wallet01");
    // The instruments are sealed at rest.
    const [row] = await sql<{ sealed: Buffer }>(
      t.app.orm.em.fork(),
      "select sealed from payment_instruments where user_id = $1",
      [u.userId],
    );
    expect(row?.sealed.toString("latin1")).not.toContain("RCP_bank0001");
  });

  it("refuses a live disbursement the platform could not pay or collect: 422 naming what is missing", async () => {
    const u = await liveUser({ walletRecipientCode: "RCP_wallet02" });
    const res = await create(u.userId, "live-003");
    expect(res.status).toBe(422);
    expect(res.body.code).toBe("validation_failed");
    expect(Object.keys(res.body.details.fields).sort()).toEqual(["destination", "repaymentSchedule"]);
    expect(await count("select 1 from disbursements where reference = 'live-003'", [])).toBe(0);
  });

  it("keeps environments apart: a sandbox key reaches only the simulator, a live key only the provider", async () => {
    const before = fake.calls.length;
    const s = await createUser(t, { environment: "sandbox" });
    await t.internal.consents.grantConsent({
      userId: s.userId,
      partnerId: p.partnerId,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    const sandbox = await create(s.userId, "sbx-001", { key: p.sandboxKey });
    expect(sandbox.status).toBe(200);
    await eventually(async () => (await get(sandbox.body.id, p.sandboxKey)).status === "DELIVERED");
    expect(fake.calls.length).toBe(before);
    expect(await count("select 1 from sandbox_transfers where reference = $1", [sandbox.body.id])).toBe(1);

    const u = await liveUser();
    const live = await create(u.userId, "live-004");
    await settled(live.body.id, "DELIVERED");
    expect(fake.transfers.has(live.body.id)).toBe(true);
    expect(await count("select 1 from sandbox_transfers where reference = $1", [live.body.id])).toBe(0);
    // The provider's webhook settles production disbursements only.
    const status = await fake.sendWebhook(webhookUrl(), "transfer.reversed", { reference: sandbox.body.id });
    expect(status).toBe(200);
    expect((await get(sandbox.body.id, p.sandboxKey)).status).toBe("DELIVERED");
  });

  it("one disbursement and one transfer at the provider for 50 concurrent creates with one key", async () => {
    const u = await liveUser();
    const results = await Promise.all(
      Array.from({ length: 50 }, () =>
        create(u.userId, "live-005", { idem: "live-same-key", accept: false }),
      ),
    );
    const ok = results.filter((r) => r.status === 200);
    for (const r of results.filter((r) => r.status !== 200))
      expect(r.body.code).toBe("idempotency_key_in_use");
    expect(new Set(ok.map((r) => JSON.stringify(r.body))).size).toBe(1);
    const id = ok[0]?.body.id as string;
    // The person accepts once (the creates' replays all name the same disbursement).
    await acceptMandate(t, p.liveKey, id);
    await settled(id, "DELIVERED");
    expect([...fake.transfers.values()].filter((x) => x.reference === id)).toHaveLength(1);
    expect(fake.calls.filter((c) => c === "POST /transfer").length).toBeGreaterThan(0);
    expect(await count("select 1 from disbursements where reference = 'live-005'", [])).toBe(1);
    const other = await create(u.userId, "live-005-other", { idem: "live-same-key" });
    expect(other.status).toBe(422);
    expect(other.body.code).toBe("idempotency_key_reused");
  });

  it("a lost response is resolved by asking the provider by reference, never by paying again", async () => {
    const u = await liveUser();
    const transfersBefore = fake.transfers.size;
    fake.loseResponses = 1;
    const res = await create(u.userId, "live-006");
    await eventually(async () => (await get(res.body.id)).status === "DELIVERED", {
      timeoutMs: 20_000,
      what: "DELIVERED after the retry",
    });
    expect(fake.transfers.size).toBe(transfersBefore + 1);
    expect(fake.calls).toContain(`GET /transfer/verify/${res.body.id}`);
    expect(await events("DISBURSEMENT_DELIVERED", res.body.id)).toBe(1);
  });

  it("a pending transfer waits for the provider's signed webhook, which is checked against the provider", async () => {
    fake.transferStatus = () => "pending";
    const u = await liveUser();
    const res = await create(u.userId, "live-007");
    // PROCESSING is set when the payout is claimed, just before the provider is called: wait for the call.
    const transfer = await eventually(() => fake.transfers.get(res.body.id), { what: "the transfer" });
    expect((await get(res.body.id)).status).toBe("PROCESSING");
    fake.transferStatus = () => "success";

    // A forged signature is refused and changes nothing.
    expect(
      await fake.sendWebhook(webhookUrl(), "transfer.success", { reference: res.body.id }, "ab".repeat(64)),
    ).toBe(401);
    // A genuine webhook whose news the provider does not confirm changes nothing either.
    expect(await fake.sendWebhook(webhookUrl(), "transfer.success", { reference: res.body.id })).toBe(200);
    expect((await get(res.body.id)).status).toBe("PROCESSING");

    transfer.status = "success";
    expect(await fake.sendWebhook(webhookUrl(), "transfer.success", { reference: res.body.id })).toBe(200);
    expect((await get(res.body.id)).status).toBe("DELIVERED");
    // The provider sends it again: nothing more happens.
    expect(await fake.sendWebhook(webhookUrl(), "transfer.success", { reference: res.body.id })).toBe(200);
    expect(await events("DISBURSEMENT_DELIVERED", res.body.id)).toBe(1);
    expect(await count("select 1 from book_entries where disbursement_id = $1", [res.body.id])).toBe(2);
  });

  it("a failed transfer is FAILED with a reason and its schedule cancelled", async () => {
    fake.transferStatus = () => "failed";
    const u = await liveUser();
    const res = await create(u.userId, "live-008");
    const failed = await settled(res.body.id, "FAILED");
    fake.transferStatus = () => "success";
    expect(failed.failureReason).toBe("transfer_failed");
    const repayments = await rest(
      t.partnerUrl,
      "GET",
      `/partner/v1/disbursements/${res.body.id}/repayments`,
      {
        key: p.liveKey,
      },
    );
    expect(repayments.body.repayments.map((r: { status: string }) => r.status)).toEqual([
      "CANCELLED",
      "CANCELLED",
    ]);
  });

  it("a transfer reversed after delivery is REVERSED with a reason, booked back, its schedule cancelled, no event", async () => {
    const u = await liveUser();
    const res = await create(u.userId, "live-009");
    await settled(res.body.id, "DELIVERED");
    const transfer = fake.transfers.get(res.body.id);
    if (!transfer) throw new Error("no transfer");
    transfer.status = "reversed";
    expect(await fake.sendWebhook(webhookUrl(), "transfer.reversed", { reference: res.body.id })).toBe(200);
    const reversed = await get(res.body.id);
    expect(reversed).toMatchObject({
      status: "REVERSED",
      failureReason: "transfer_reversed",
      deliveredAt: expect.any(String),
      reversedAt: expect.any(String),
    });
    const books = await rest(t.partnerUrl, "GET", "/partner/v1/books", { key: p.liveKey });
    expect(
      books.body.entries.filter((e: { disbursementId: string }) => e.disbursementId === res.body.id),
    ).toHaveLength(4);
    const entries = await sql<{ kind: string; amount_kobo: string }>(
      t.app.orm.em.fork(),
      "select kind, amount_kobo::text from book_entries where disbursement_id = $1 order by kind",
      [res.body.id],
    );
    expect(entries).toEqual([
      { kind: "FEE", amount_kobo: "-75000" },
      { kind: "FEE_REVERSED", amount_kobo: "75000" },
      { kind: "PRINCIPAL_OUT", amount_kobo: "-5000000" },
      { kind: "PRINCIPAL_REVERSED", amount_kobo: "5000000" },
    ]);
    const repayments = await rest(
      t.partnerUrl,
      "GET",
      `/partner/v1/disbursements/${res.body.id}/repayments`,
      {
        key: p.liveKey,
      },
    );
    expect(new Set(repayments.body.repayments.map((r: { status: string }) => r.status))).toEqual(
      new Set(["CANCELLED"]),
    );
    expect(await count("select 1 from events where body like $1", [`%${res.body.id}%`])).toBe(1);
  });
});

describe("direct debits through the provider's HTTP API", () => {
  /** A delivered live disbursement with one installment due in `dueIn` days. */
  async function delivered(reference: string) {
    const u = await liveUser();
    const res = await create(u.userId, reference);
    await settled(res.body.id, "DELIVERED");
    const [first] = await sql<{ id: string; next_attempt_at: Date }>(
      t.app.orm.em.fork(),
      "select id, next_attempt_at from installments where disbursement_id = $1 order by seq limit 1",
      [res.body.id],
    );
    if (!first) throw new Error("no installment");
    return { id: res.body.id as string, installmentId: first.id, dueAt: first.next_attempt_at };
  }
  const repayment = async (disbursementId: string) =>
    (
      await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${disbursementId}/repayments`, {
        key: p.liveKey,
      })
    ).body.repayments[0];

  it("charges the stored authorisation on the due date and books it", async () => {
    const d = await delivered("live-101");
    clock.set(d.dueAt.getTime());
    expect(await t.app.services.repayments.collect(t.app.orm.em.fork(), d.installmentId)).toBe("COLLECTED");
    expect(fake.charges.get(`${d.installmentId}:1`)).toMatchObject({
      amount: 2_700_000,
      authorizationCode: "AUTH_debit01",
      email: "user@example.com",
    });
    expect(await repayment(d.id)).toMatchObject({ status: "COLLECTED", attempts: 1 });
    expect(await events("REPAYMENT_COLLECTED", d.installmentId)).toBe(1);
  });

  it("a provider that took more than asked is never booked as more, on the charge or on its webhook", async () => {
    const d = await delivered("live-109");
    clock.set(d.dueAt.getTime());
    fake.chargeAmount = (asked) => asked * 1000;
    try {
      await expect(t.app.services.repayments.collect(t.app.orm.em.fork(), d.installmentId)).rejects.toThrow(
        /differs from ours/,
      );
      const charge = fake.charges.get(`${d.installmentId}:1`);
      expect(charge?.amount).toBe(2_700_000_000);
      // Its success webhook is reconciled by asking the provider, which still says the larger amount.
      expect(
        await fake.sendWebhook(webhookUrl(), "charge.success", { reference: charge?.reference }),
      ).not.toBe(200);
      expect((await repayment(d.id)).status).not.toBe("COLLECTED");
      const booked = await sql<{ amount_kobo: string }>(
        t.app.orm.em.fork(),
        "select amount_kobo::text from book_entries where installment_id = $1",
        [d.installmentId],
      );
      expect(booked).toEqual([]);
      const ledger = await sql(t.app.orm.em.fork(), "select 1 from ledger_entries where id = $1", [
        `repayment:${d.installmentId}`,
      ]);
      expect(ledger).toEqual([]);
    } finally {
      fake.chargeAmount = (asked) => asked;
    }
  });

  it("a charge whose answer was lost is asked about by the same reference, never charged twice", async () => {
    const d = await delivered("live-102");
    clock.set(d.dueAt.getTime());
    fake.loseResponses = 1;
    await expect(t.app.services.repayments.collect(t.app.orm.em.fork(), d.installmentId)).rejects.toThrow(
      /HTTP 500/,
    );
    expect(fake.charges.has(`${d.installmentId}:1`)).toBe(true);
    // The next attempt, past the lease, asks the provider about the same reference.
    clock.advance(3 * ms.minute);
    expect(await t.app.services.repayments.collect(t.app.orm.em.fork(), d.installmentId)).toBe("COLLECTED");
    expect([...fake.charges.keys()].filter((k) => k.startsWith(d.installmentId))).toEqual([
      `${d.installmentId}:1`,
    ]);
    expect(await repayment(d.id)).toMatchObject({ status: "COLLECTED", attempts: 1 });
  });

  it("a pending charge is settled by the provider's charge.success webhook", async () => {
    const d = await delivered("live-103");
    clock.set(d.dueAt.getTime());
    fake.chargeStatus = () => ({ status: "ongoing", gatewayResponse: "" });
    expect(await t.app.services.repayments.collect(t.app.orm.em.fork(), d.installmentId)).toBe("SCHEDULED");
    fake.chargeStatus = () => ({ status: "success", gatewayResponse: "Approved" });
    const charge = fake.charges.get(`${d.installmentId}:1`);
    if (!charge) throw new Error("no charge");
    charge.status = "success";
    expect(await fake.sendWebhook(webhookUrl(), "charge.success", { reference: charge.reference })).toBe(200);
    expect(await repayment(d.id)).toMatchObject({ status: "COLLECTED", attempts: 1 });
    expect(await events("REPAYMENT_COLLECTED", d.installmentId)).toBe(1);
  });

  it("a declined charge is reported with a stable reason and retried the next day under a new reference", async () => {
    const d = await delivered("live-104");
    clock.set(d.dueAt.getTime());
    fake.chargeStatus = () => ({ status: "failed", gatewayResponse: "Insufficient Funds" });
    expect(await t.app.services.repayments.collect(t.app.orm.em.fork(), d.installmentId)).toBe("SCHEDULED");
    expect(await repayment(d.id)).toMatchObject({ status: "SCHEDULED", lastFailure: "insufficient_funds" });
    fake.chargeStatus = () => ({ status: "success", gatewayResponse: "Approved" });
    clock.advance(ms.day);
    expect(await t.app.services.repayments.collect(t.app.orm.em.fork(), d.installmentId)).toBe("COLLECTED");
    expect(fake.charges.get(`${d.installmentId}:2`)?.status).toBe("success");
    expect(await events("REPAYMENT_FAILED", d.installmentId)).toBe(1);
  });
});
