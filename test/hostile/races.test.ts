import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createConsentedUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { acceptMandate } from "../support/mandates.ts";
import { eventually } from "../support/wait.ts";

// A partner acting in bad faith fires the same state change many times at once, each with its own
// Idempotency-Key: exactly one may succeed, and the limits hold.
let t: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 10_000, refillPerSecond: 10_000 },
        write: { capacity: 10_000, refillPerSecond: 10_000 },
      },
      // Eighty requests at once queue for five connections: how long the last one waits is how fast this
      // machine is, and past the default 3 s it would be answered 503. The races are the point here, not an
      // overloaded pool (faults/unit-of-work.test.ts), so a request waits for its connection up to a minute.
      dbTimeouts: { ...loadConfig({}).dbTimeouts, acquireMs: 60_000 },
    },
  });
  p = await createPartner(t);
});
afterAll(() => t?.stop());

const post = (path: string, idem: string, body?: unknown) =>
  rest(t.partnerUrl, "POST", path, {
    key: p.sandboxKey,
    headers: { "idempotency-key": idem },
    ...(body === undefined ? {} : { body }),
  });
const get = (path: string) => rest(t.partnerUrl, "GET", path, { key: p.sandboxKey });
const tally = (statuses: number[]) => {
  const n: Record<number, number> = {};
  for (const s of statuses) n[s] = (n[s] ?? 0) + 1;
  return n;
};

async function disbursement(reference: string, status: string) {
  const u = await createConsentedUser(t, p.partnerId, { environment: "sandbox" });
  const res = await post("/partner/v1/disbursements", reference, {
    userId: u.userId,
    principalKobo: "1000000",
    destination: "WALLET",
    reference,
    repaymentSchedule: {
      installments: [
        { dueDate: new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10), amountKobo: "1100000" },
      ],
    },
    scheduleAcceptedAt: new Date().toISOString(),
  });
  expect(res.status).toBe(200);
  await acceptMandate(t, p.sandboxKey, res.body.id);
  await eventually(
    async () => (await get(`/partner/v1/disbursements/${res.body.id}`)).body.status === status,
  );
  return res.body.id as string;
}

describe("the same sandbox helper, 40 times at once with 40 keys", () => {
  it("reverses a payout once: one 200, the rest 409, booked back once", async () => {
    const id = await disbursement("race-reverse", "DELIVERED");
    const answers = await Promise.all(
      [...Array(40)].map((_, i) => post(`/partner/v1/sandbox/disbursements/${id}/reverse`, `rev-${i}`)),
    );
    expect(tally(answers.map((a) => a.status))).toEqual({ 200: 1, 409: 39 });
    const books = (await get("/partner/v1/books")).body.entries.filter(
      (e: { disbursementId: string }) => e.disbursementId === id,
    );
    expect(books.map((e: { kind: string }) => e.kind).sort()).toEqual([
      "FEE",
      "FEE_REVERSED",
      "PRINCIPAL_OUT",
      "PRINCIPAL_REVERSED",
    ]);
  });

  it("fails a held payout once: one 200, the rest 409", async () => {
    const id = await disbursement("race-fail_pending", "PROCESSING");
    const answers = await Promise.all(
      [...Array(40)].map((_, i) => post(`/partner/v1/sandbox/disbursements/${id}/fail`, `fail-${i}`)),
    );
    expect(tally(answers.map((a) => a.status))).toEqual({ 200: 1, 409: 39 });
    expect((await get(`/partner/v1/disbursements/${id}`)).body.status).toBe("FAILED");
  });
});

describe("the subscription cap", () => {
  it("holds under 80 concurrent creates: 50 subscriptions, the rest 409", async () => {
    const other = await createPartner(t);
    const answers = await Promise.all(
      [...Array(80)].map((_, i) =>
        rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
          key: other.sandboxKey,
          headers: { "idempotency-key": `cap-${i}` },
          body: { url: `http://127.0.0.1:9/h${i}`, events: ["*"] },
        }),
      ),
    );
    expect(tally(answers.map((a) => a.status))).toEqual({ 200: 50, 409: 30 });
    const list = await rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: other.sandboxKey });
    expect(list.body).toHaveLength(50);
  });
});

describe("collects racing reverses on one disbursement", () => {
  it("never answer 500: each is applied or refused, the money stays right", async () => {
    const u = await createConsentedUser(t, p.partnerId);
    const statuses: number[] = [];
    for (let round = 0; round < 3; round++) {
      const reference = `race-rev-${round}`;
      const day = (n: number) => new Date(Date.now() + n * 86_400_000).toISOString().slice(0, 10);
      const res = await post("/partner/v1/disbursements", reference, {
        userId: u.userId,
        principalKobo: "5400000",
        destination: "WALLET",
        reference,
        repaymentSchedule: {
          installments: [10, 20, 30, 40, 50, 60].map((n) => ({ dueDate: day(n), amountKobo: "900000" })),
        },
      });
      await acceptMandate(t, p.sandboxKey, res.body.id);
      await eventually(
        async () => (await get(`/partner/v1/disbursements/${res.body.id}`)).body.status === "DELIVERED",
      );
      const [first, ...rest] = (await get(`/partner/v1/disbursements/${res.body.id}/repayments`)).body
        .repayments;
      await post(`/partner/v1/sandbox/repayments/${first.id}/collect`, `c-${round}-0`, {
        outcome: "SUCCESS",
      });
      const answers = await Promise.all([
        ...rest.map((r: { id: string }, i: number) =>
          post(`/partner/v1/sandbox/repayments/${r.id}/collect`, `c-${round}-${i + 1}`, {
            outcome: "SUCCESS",
          }),
        ),
        ...[...Array(5)].map((_, i) =>
          post(`/partner/v1/sandbox/disbursements/${res.body.id}/reverse`, `r-${round}-${i}`),
        ),
      ]);
      statuses.push(...answers.map((a) => a.status));
      // Once the refunds are made, the disbursement's books sum to nothing.
      await eventually(async () => {
        const repayments = (await get(`/partner/v1/disbursements/${res.body.id}/repayments`)).body.repayments;
        return repayments.every(
          (r: { status: string; refund?: { status: string } }) =>
            r.status !== "COLLECTED" || r.refund?.status === "REFUNDED",
        );
      });
      const entries = (await get("/partner/v1/books")).body.entries.filter(
        (e: { disbursementId: string }) => e.disbursementId === res.body.id,
      );
      expect(entries.reduce((s: bigint, e: { amountKobo: string }) => s + BigInt(e.amountKobo), 0n)).toBe(0n);
    }
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
  });
});
