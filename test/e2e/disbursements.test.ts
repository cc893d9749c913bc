import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/platform/db/sql.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { acceptMandate } from "../support/mandates.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

let t: TestApp;
let p: PartnerFixture;
let receiver: TestReceiver;

beforeAll(async () => {
  // 50 concurrent creates are the whole contract write bucket: raise it, rate limits are tested elsewhere.
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 1000, refillPerSecond: 1000 },
        write: { capacity: 1000, refillPerSecond: 1000 },
      },
    },
  });
  p = await createPartner(t); // fee 150 bps
  receiver = await startReceiver();
  await createWebhook(t.partnerUrl, p.sandboxKey, { url: receiver.url, events: ["DISBURSEMENT_DELIVERED"] });
});
afterAll(async () => {
  await receiver?.close();
  await t?.stop();
});

const day = (n: number) => new Date(Date.now() + n * 86_400_000).toISOString().slice(0, 10);
const body = (userId: string, reference: string, principal = "1234567") => ({
  userId,
  principalKobo: principal,
  destination: "WALLET",
  reference,
  repaymentSchedule: {
    installments: [
      { dueDate: day(30), amountKobo: "700000" },
      { dueDate: day(60), amountKobo: "700000" },
    ],
  },
  scheduleAcceptedAt: new Date().toISOString(),
});
const create = (b: unknown, key = p.sandboxKey, idempotencyKey: string | null = `k-${Math.random()}`) =>
  rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
    key,
    body: b,
    headers: idempotencyKey ? { "idempotency-key": idempotencyKey } : {},
  });
const consentedUser = async () => {
  const u = await createUser(t);
  await t.internal.consents.grantConsent({
    userId: u.userId,
    partnerId: p.partnerId,
    scopes: ["standing"],
    ledgerWindowDays: 30,
  });
  return u;
};
const status = async (id: string) =>
  (await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${id}`, { key: p.sandboxKey })).body;

describe("disbursements in the sandbox", () => {
  it("pays out through the simulator once the person accepts: AWAITING_ACCEPTANCE, then DELIVERED with the fee fixed at creation, booked, and reported", async () => {
    const u = await consentedUser();
    const res = await create(body(u.userId, "loan-001"));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: expect.stringMatching(/^dsb_/),
      status: "AWAITING_ACCEPTANCE",
      acceptanceUrl: expect.stringMatching(/\/mandate\/[0-9A-Za-z]{32}$/),
      totalRepayableKobo: "1400000",
      principalKobo: "1234567",
      feeKobo: "18519",
      feeRateBps: 150,
      destination: "WALLET",
      reference: "loan-001",
    });
    expect(res.body.acceptance).toBeUndefined();
    // The rate changing later does not change this disbursement.
    await t.internal.partners.setPartnerFee({ partnerId: p.partnerId, feeRateBps: 300 });
    const accepted = await acceptMandate(t, p.sandboxKey, res.body.id);
    expect(accepted).toMatchObject({
      status: expect.stringMatching(/^(PENDING|PROCESSING|DELIVERED)$/),
      acceptance: {
        authentication: { method: "OTP_SMS", at: expect.any(String) },
        repaymentSchedule: res.body.repaymentSchedule,
        totalRepayableKobo: "1400000",
        principalKobo: "1234567",
      },
    });
    expect(accepted.acceptanceUrl ?? "").toBe("");
    const done = await eventually(async () => {
      const d = await status(res.body.id);
      return d.status === "DELIVERED" ? d : undefined;
    });
    expect(done).toMatchObject({ feeKobo: "18519", feeRateBps: 150, deliveredAt: expect.any(String) });
    await t.internal.partners.setPartnerFee({ partnerId: p.partnerId, feeRateBps: 150 });
    const books = await sql<{ kind: string; amount_kobo: string }>(
      t.app.orm.em.fork(),
      "select kind, amount_kobo::text from book_entries where disbursement_id = $1 order by kind",
      [res.body.id],
    );
    expect(books).toEqual([
      { kind: "FEE", amount_kobo: "-18519" },
      { kind: "PRINCIPAL_OUT", amount_kobo: "-1234567" },
    ]);
    const event = await eventually(() =>
      receiver.received.find((r) => JSON.parse(r.body).payload.disbursementId === res.body.id),
    );
    expect(JSON.parse(event.body)).toMatchObject({
      type: "DISBURSEMENT_DELIVERED",
      payload: { principalKobo: "1234567", feeKobo: "18519" },
    });
  });

  it("fails deterministically on request, with a reason, no books and no event", async () => {
    const u = await consentedUser();
    const res = await create(body(u.userId, "loan-002_fail"));
    await acceptMandate(t, p.sandboxKey, res.body.id);
    const failed = await eventually(async () => {
      const d = await status(res.body.id);
      return d.status === "FAILED" ? d : undefined;
    });
    expect(failed.failureReason).toBe("destination_unavailable");
    const books = await sql(t.app.orm.em.fork(), "select 1 from book_entries where disbursement_id = $1", [
      res.body.id,
    ]);
    expect(books).toHaveLength(0);
  });

  it("creates one disbursement and one transfer for 50 concurrent creates with one key, the same response to all", async () => {
    const u = await consentedUser();
    const b = body(u.userId, "loan-003");
    const results = await Promise.all(
      Array.from({ length: 50 }, () => create(b, p.sandboxKey, "same-key-50")),
    );
    const ok = results.filter((r) => r.status === 200);
    for (const r of results.filter((r) => r.status !== 200))
      expect(r.body.code).toBe("idempotency_key_in_use");
    expect(new Set(ok.map((r) => JSON.stringify(r.body))).size).toBe(1);
    // Retries after the first finished get exactly that response.
    const again = await create(b, p.sandboxKey, "same-key-50");
    expect(again.body).toEqual(ok[0]?.body);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    await acceptMandate(t, p.sandboxKey, again.body.id);
    await eventually(async () => (await status(again.body.id)).status === "DELIVERED");
    const rows = await sql(
      t.app.orm.em.fork(),
      "select 1 from disbursements where reference = 'loan-003' and partner_id = $1",
      [p.partnerId],
    );
    expect(rows).toHaveLength(1);
    const transfers = await sql(t.app.orm.em.fork(), "select 1 from sandbox_transfers where reference = $1", [
      again.body.id,
    ]);
    expect(transfers).toHaveLength(1);
    const other = await create({ ...b, principalKobo: "1" }, p.sandboxKey, "same-key-50");
    expect(other.status).toBe(422);
    expect(other.body.code).toBe("idempotency_key_reused");
  });

  it("requires an Idempotency-Key, an active consent and a valid request", async () => {
    const u = await consentedUser();
    const noKey = await create(body(u.userId, "loan-004"), p.sandboxKey, null);
    expect(noKey.status).toBe(400);
    expect(noKey.body.code).toBe("idempotency_key_required");
    const stranger = await createUser(t);
    expect((await create(body(stranger.userId, "loan-005"))).body.code).toBe("consent_required");
    const invalid = await create({
      ...body(u.userId, "loan-006"),
      principalKobo: "0",
      repaymentSchedule: { installments: [{ dueDate: day(-1), amountKobo: "5" }] },
    });
    // The contract's rules (the proto's protovalidate rules, checked at the edge) answer first; the checks
    // no rule can express (a due date from tomorrow in Lagos) once the rules hold.
    expect(invalid.status).toBe(422);
    expect(Object.keys(invalid.body.details.fields)).toEqual(["principalKobo"]);
    const pastDue = await create({
      ...body(u.userId, "loan-006"),
      repaymentSchedule: { installments: [{ dueDate: day(-1), amountKobo: "5" }] },
    });
    expect(pastDue.status).toBe(422);
    expect(Object.keys(pastDue.body.details.fields)).toEqual(["repaymentSchedule.installments[0].dueDate"]);
    const dup = await create(body(u.userId, "loan-001"));
    expect(dup.status).toBe(409);
  });

  it("never reaches the sandbox simulator with a live key", async () => {
    const u = await createUser(t, { environment: "production" });
    await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: p.partnerId,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    const res = await create(body(u.userId, "live-001"), p.liveKey);
    expect(res.status).toBe(503);
    expect(res.body.code).toBe("unavailable");
    const rows = await sql(
      t.app.orm.em.fork(),
      "select 1 from disbursements where environment = 'production'",
    );
    expect(rows).toHaveLength(0);
  });

  it("hides other tenants' disbursements", async () => {
    const u = await consentedUser();
    const res = await create(body(u.userId, "loan-007"));
    expect(
      (await rest(t.partnerUrl, "GET", `/partner/v1/disbursements/${res.body.id}`, { key: p.liveKey }))
        .status,
    ).toBe(404);
  });
});
