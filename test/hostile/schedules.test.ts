import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

// A partner with the person's consent tries schedules nobody should be held to.
let t: TestApp;
let p: PartnerFixture;
let userId: string;

beforeAll(async () => {
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 1000, refillPerSecond: 1000 },
        write: { capacity: 1000, refillPerSecond: 1000 },
      },
    },
  });
  p = await createPartner(t);
  userId = (await createUser(t)).userId;
  await t.internal.consents.grantConsent({
    userId,
    partnerId: p.partnerId,
    scopes: ["standing"],
    ledgerWindowDays: 30,
  });
});
afterAll(async () => {
  await t?.stop();
});

/** The day `n` days from today in Lagos (UTC+1). */
const day = (n: number) => new Date(Date.now() + 3_600_000 + n * 86_400_000).toISOString().slice(0, 10);
let n = 0;
const create = (principalKobo: string, installments: { dueDate: string; amountKobo: string }[]) =>
  rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
    key: p.sandboxKey,
    headers: { "idempotency-key": `sched-${++n}` },
    body: {
      userId,
      principalKobo,
      destination: "WALLET",
      reference: `sched-${n}`,
      repaymentSchedule: { installments },
      scheduleAcceptedAt: new Date().toISOString(),
    },
  });
const count = async () =>
  (await sql(t.app.orm.em.fork(), "select 1 from disbursements where partner_id = $1", [p.partnerId])).length;

describe("schedules refused at create, 422 with the field, never 500", () => {
  it.each([
    [
      "a ₦1 payout with a ₦9,000,000,000 installment",
      "100",
      [{ dueDate: day(30), amountKobo: "900000000000" }],
      "repaymentSchedule",
    ],
    [
      "a total just over the default cap (principal + 50 %)",
      "100000",
      [{ dueDate: day(30), amountKobo: "150001" }],
      "repaymentSchedule",
    ],
    [
      "a schedule past the tenor (365 days)",
      "100000",
      [{ dueDate: day(366), amountKobo: "110000" }],
      "repaymentSchedule.installments[0].dueDate",
    ],
    [
      "2027-02-30",
      "100000",
      [{ dueDate: "2027-02-30", amountKobo: "110000" }],
      "repaymentSchedule.installments[0].dueDate",
    ],
    [
      "a past due date",
      "100000",
      [{ dueDate: day(-1), amountKobo: "110000" }],
      "repaymentSchedule.installments[0].dueDate",
    ],
    [
      "today",
      "100000",
      [{ dueDate: day(0), amountKobo: "110000" }],
      "repaymentSchedule.installments[0].dueDate",
    ],
    [
      "a due date in 9999",
      "100000",
      [{ dueDate: "9999-12-31", amountKobo: "110000" }],
      "repaymentSchedule.installments[0].dueDate",
    ],
    [
      "year 0000",
      "100000",
      [{ dueDate: "0000-01-01", amountKobo: "110000" }],
      "repaymentSchedule.installments[0].dueDate",
    ],
    [
      "a negative installment",
      "100000",
      [{ dueDate: day(30), amountKobo: "-1" }],
      "repaymentSchedule.installments[0].amountKobo",
    ],
    [
      "61 installments",
      "100000",
      Array.from({ length: 61 }, (_, i) => ({ dueDate: day(i + 1), amountKobo: "1000" })),
      "repaymentSchedule",
    ],
  ])("%s", async (_what, principal, installments, field) => {
    const before = await count();
    const res = await create(principal, installments);
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(res.body.code).toBe("validation_failed");
    expect(Object.keys(res.body.details.fields)).toContain(field);
    expect(await count()).toBe(before);
  });

  it("answers thousands of installments with one short refusal, not an error per installment", async () => {
    const many = Array.from({ length: 20_000 }, () => ({ dueDate: "2027-02-30", amountKobo: "1" }));
    const res = await create("100000", many);
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.details.fields)).toEqual(["repaymentSchedule"]);
    expect(JSON.stringify(res.body).length).toBeLessThan(2_000);
  });

  it("accepts a schedule exactly at the caps: principal + 50 %, the last day of the tenor, 60 installments", async () => {
    const at = await create("100000", [{ dueDate: day(365), amountKobo: "150000" }]);
    expect(at.status, JSON.stringify(at.body)).toBe(200);
    const sixty = await create(
      "60000",
      Array.from({ length: 60 }, (_, i) => ({ dueDate: day(i + 1), amountKobo: "1500" })),
    );
    expect(sixty.status, JSON.stringify(sixty.body)).toBe(200);
  });

  it("follows the partner's own caps, set by the operator", async () => {
    const { partner } = await t.internal.partners.setPartnerTerms({
      partnerId: p.partnerId,
      maxCostBps: 1_000,
      maxTenorDays: 730,
    });
    expect(partner).toMatchObject({ maxCostBps: 1_000, maxTenorDays: 730 });
    try {
      expect((await create("100000", [{ dueDate: day(30), amountKobo: "110001" }])).status).toBe(422);
      expect((await create("100000", [{ dueDate: day(700), amountKobo: "110000" }])).status).toBe(200);
      await expect(
        t.internal.partners.setPartnerTerms({ partnerId: p.partnerId, maxCostBps: -1, maxTenorDays: 0 }),
      ).rejects.toThrow(/maxCostBps|maxTenorDays|not valid/);
    } finally {
      await t.internal.partners.setPartnerTerms({
        partnerId: p.partnerId,
        maxCostBps: 5_000,
        maxTenorDays: 365,
      });
    }
  });
});

describe("the books' period, refused 422 with the field, never 500", () => {
  it.each([
    ["from=0000-01-01", "from"],
    ["from=0000-02-29", "from"],
    ["to=9999-12-31", "to"],
    ["from=2027-02-30", "from"],
    ["from=1969-12-31", "from"],
    ["from=2026-03-01&to=2026-02-01", "to"],
    ["from=+12026-01-01", "from"],
  ])("%s", async (query, field) => {
    const res = await rest(t.partnerUrl, "GET", `/partner/v1/books?${query}`, { key: p.sandboxKey });
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(Object.keys(res.body.details.fields)).toEqual([field]);
  });

  it("answers the widest period it takes", async () => {
    const res = await rest(t.partnerUrl, "GET", "/partner/v1/books?from=1970-01-01&to=9999-12-30", {
      key: p.sandboxKey,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });
});
