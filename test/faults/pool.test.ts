import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PAYSTACK_WEBHOOK_PATH } from "../../src/disbursements/provider-webhooks.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { type RestResponse, rest } from "../support/clients.ts";
import { type FakePaystack, startFakePaystack } from "../support/fake-paystack.ts";
import { unusedSmsProvider } from "../support/fake-sms.ts";
import { acceptMandate } from "../support/mandates.ts";
import { eventually } from "../support/wait.ts";

// Every kind of request that opens a transaction, many more at once than the pool has connections. Before
// each request had one unit of work, a request holding a transaction could wait for a second connection
// while the others held the rest: the whole pool sat `idle in transaction` and the service hung.
const POOL = 4;
const N = 24;
const clock = new ManualClock(Date.now());
let t: TestApp;
let p: PartnerFixture;
let bystander: PartnerFixture;
let fake: FakePaystack;

beforeAll(async () => {
  fake = await startFakePaystack();
  t = await startTestApp({
    clock,
    // The production subscription below (production events are kept only when subscribed to) is on loopback.
    productionLocalWebhooks: true,
    config: {
      dbPoolSize: POOL,
      paymentProvider: { baseUrl: fake.url, secretKey: fake.secretKey, timeoutMs: 5_000 },
      smsProvider: unusedSmsProvider,
      rateLimits: {
        read: { capacity: 10_000, refillPerSecond: 10_000 },
        write: { capacity: 10_000, refillPerSecond: 10_000 },
      },
    },
  });
  // Debits here are driven by the test, on its clock: the minute sweep would race it.
  await t.app.boss.unschedule("repayments.sweep");
  p = await createPartner(t);
  bystander = await createPartner(t);
  await createWebhook(t.partnerUrl, p.sandboxKey, { url: "http://127.0.0.1:9/hooks", events: ["*"] });
  await createWebhook(t.partnerUrl, p.liveKey, { url: "http://127.0.0.1:9/hooks", events: ["*"] });
  await createWebhook(t.partnerUrl, bystander.sandboxKey, { url: "http://127.0.0.1:9/b", events: ["*"] });
}, 60_000);
afterAll(async () => {
  await t?.stop();
  await fake?.close();
});

const post = (path: string, o: { body?: unknown; idem?: string; key?: string } = {}) =>
  rest(t.partnerUrl, "POST", path, {
    key: o.key ?? p.sandboxKey,
    ...(o.body === undefined ? {} : { body: o.body }),
    ...(o.idem ? { headers: { "idempotency-key": o.idem } } : {}),
  });
const get = (path: string, key = p.sandboxKey) => rest(t.partnerUrl, "GET", path, { key });
const count = async (text: string, params: unknown[] = []) =>
  (await sql<{ n: number }>(t.app.orm.em.fork(), `select count(*)::int as n from (${text}) q`, params))[0]?.n;
const day = (n: number) => new Date(clock.now().getTime() + n * ms.day).toISOString().slice(0, 10);

/**
 * Runs the calls all at once while another partner keeps reading and an orchestrator keeps probing
 * `/readyz`; returns the responses. The bystander's reads and the probes must all answer, and in good time.
 */
type Res = RestResponse<any>;
async function burst(calls: (() => Promise<Res>)[]): Promise<Res[]> {
  let done = false;
  const probes: { status: number; ms: number; what: string }[] = [];
  const probe = async (what: string, call: () => Promise<number>) => {
    while (!done) {
      const started = performance.now();
      probes.push({ what, status: await call(), ms: performance.now() - started });
    }
  };
  const watchers = [
    probe("readyz", async () => (await fetch(`${t.partnerUrl}/readyz`)).status),
    probe("bystander", async () => (await get("/partner/v1/webhooks", bystander.sandboxKey)).status),
  ];
  const results = await Promise.all(calls.map((c) => c())).finally(() => {
    done = true;
  });
  await Promise.all(watchers);
  expect(probes.length).toBeGreaterThan(1);
  // A hang shows as a probe that waited for the pool's acquire time-out (3 s) or never came back.
  expect(probes.filter((x) => x.status !== 200 || x.ms > 2_000)).toEqual([]);
  return results;
}
const statuses = (rs: Res[]) => [...new Set(rs.map((r) => r.status))];
const range = (n: number) => [...Array(n).keys()];

describe(`${N} concurrent calls of every kind that opens a transaction, on a pool of ${POOL}`, () => {
  it("idempotent webhook creates and secret rotations all complete", async () => {
    const created = await burst(
      range(N).map(
        (i) => () =>
          post("/partner/v1/webhooks", {
            idem: `whk-create-${i}`,
            body: { url: `http://127.0.0.1:9/h${i}`, events: ["consent.*"] },
          }),
      ),
    );
    expect(statuses(created)).toEqual([200]);
    const hook = created[0]?.body.id as string;
    const rotated = await burst(
      range(N).map((i) => () => post(`/partner/v1/webhooks/${hook}/rotate-secret`, { idem: `whk-rot-${i}` })),
    );
    expect(statuses(rotated)).toEqual([200]);
    // Every rotation committed, one after another: the old secret is kept from the second on.
    expect(new Set(rotated.map((r) => r.body.secret)).size).toBe(N);
  });

  it("disbursement creates, and every sandbox helper, with and without idempotency keys, all complete", async () => {
    const users: string[] = [];
    for (const _ of range(N)) {
      const u = await createUser(t, { environment: "sandbox" });
      await t.internal.consents.grantConsent({
        userId: u.userId,
        partnerId: p.partnerId,
        scopes: ["standing"],
        ledgerWindowDays: 30,
      });
      users.push(u.userId);
    }
    const disburse = (userId: string, reference: string) =>
      post("/partner/v1/disbursements", {
        idem: reference,
        body: {
          userId,
          principalKobo: "1000000",
          destination: "WALLET",
          reference,
          repaymentSchedule: { installments: [{ dueDate: day(30), amountKobo: "1100000" }] },
          scheduleAcceptedAt: clock.now().toISOString(),
        },
      });
    const paid = await burst(users.map((u, i) => () => disburse(u, `pool-${i}`)));
    expect(statuses(paid)).toEqual([200]);
    const held = await burst(users.map((u, i) => () => disburse(u, `pool-${i}_pending`)));
    expect(statuses(held)).toEqual([200]);
    // The people accept, all at once: each acceptance queues its payout and debits in its transaction.
    const accepted = await burst(
      [...paid, ...held].map(
        (r, i) => () =>
          post(
            `/partner/v1/sandbox/disbursements/${r.body.id}/accept`,
            i % 2 ? { idem: `mandate-${i}` } : {},
          ),
      ),
    );
    expect(statuses(accepted)).toEqual([200]);
    const status = async (id: string) => (await get(`/partner/v1/disbursements/${id}`)).body.status;
    for (const r of paid) await eventually(async () => (await status(r.body.id)) === "DELIVERED");
    for (const r of held) await eventually(async () => (await status(r.body.id)) === "PROCESSING");

    const failed = await burst(
      held.map(
        (r, i) => () =>
          post(`/partner/v1/sandbox/disbursements/${r.body.id}/fail`, i % 2 ? { idem: `fail-${i}` } : {}),
      ),
    );
    expect(statuses(failed)).toEqual([200]);

    const repayments = await Promise.all(
      paid.map(
        async (r) => (await get(`/partner/v1/disbursements/${r.body.id}/repayments`)).body.repayments[0].id,
      ),
    );
    const collected = await burst(
      repayments.map(
        (id, i) => () =>
          post(`/partner/v1/sandbox/repayments/${id}/collect`, {
            body: { outcome: "SUCCESS" },
            ...(i % 2 ? { idem: `collect-${i}` } : {}),
          }),
      ),
    );
    expect(statuses(collected)).toEqual([200]);
    expect(collected.map((r) => r.body.status)).toEqual(repayments.map(() => "COLLECTED"));
    expect(
      await count("select 1 from ledger_entries where id = any($1::text[])", [
        repayments.map((id) => `repayment:${id}`),
      ]),
    ).toBe(N);

    const reversed = await burst(
      paid.map(
        (r, i) => () =>
          post(`/partner/v1/sandbox/disbursements/${r.body.id}/reverse`, i % 2 ? { idem: `rev-${i}` } : {}),
      ),
    );
    expect(statuses(reversed)).toEqual([200]);

    const scored = await burst(
      users.map(
        (u, i) => () =>
          post(`/partner/v1/sandbox/users/${u}/standing`, {
            body: { tier: "Trusted", score: 800 + i },
            ...(i % 2 ? { idem: `std-${i}` } : {}),
          }),
      ),
    );
    expect(statuses(scored)).toEqual([200]);

    const consents = await Promise.all(
      users.map(async (u) => (await get(`/partner/v1/users/${u}/consent`)).body.id as string),
    );
    const revoked = await burst(
      consents.map(
        (id, i) => () =>
          post(`/partner/v1/sandbox/consents/${id}/revoke`, i % 2 ? { idem: `revoke-${i}` } : {}),
      ),
    );
    expect(statuses(revoked)).toEqual([200]);

    const link = async (i: number) =>
      (
        await post("/partner/v1/consent-links", {
          body: { phoneNumber: `+234800000000${(i % 6) + 1}`, scopes: ["standing"], ledgerWindowDays: 30 },
        })
      ).body.id as string;
    const toAccept = await Promise.all(range(N).map(link));
    const toDecline = await Promise.all(range(N).map(link));
    const decided = await burst([
      ...toAccept.map(
        (id, i) => () =>
          post(`/partner/v1/sandbox/consent-links/${id}/accept`, i % 2 ? { idem: `acc-${i}` } : {}),
      ),
      ...toDecline.map(
        (id, i) => () =>
          post(`/partner/v1/sandbox/consent-links/${id}/decline`, i % 2 ? { idem: `dec-${i}` } : {}),
      ),
    ]);
    expect(statuses(decided)).toEqual([200]);
    expect(decided.map((r) => r.body.status).sort()).toEqual([
      ...range(N).map(() => "ACCEPTED"),
      ...range(N).map(() => "DECLINED"),
    ]);
  });

  it("repayments settled by the provider's charge.success webhooks all complete", async () => {
    const installments: string[] = [];
    for (const i of range(N)) {
      const u = await createUser(t, { environment: "production" });
      await t.internal.users.setPaymentInstruments({
        userId: u.userId,
        bankRecipientCode: "RCP_bank0001",
        walletRecipientCode: "RCP_wallet01",
        debitAuthorizationCode: "AUTH_debit01",
        debitEmail: "user@example.com",
      });
      await t.internal.consents.grantConsent({
        userId: u.userId,
        partnerId: p.partnerId,
        scopes: ["standing"],
        ledgerWindowDays: 30,
      });
      const res = await post("/partner/v1/disbursements", {
        key: p.liveKey,
        idem: `live-${i}`,
        body: {
          userId: u.userId,
          principalKobo: "5000000",
          destination: "BANK",
          reference: `live-pool-${i}`,
          repaymentSchedule: { installments: [{ dueDate: day(30), amountKobo: "5200000" }] },
          scheduleAcceptedAt: clock.now().toISOString(),
        },
      });
      expect(res.status).toBe(200);
      await acceptMandate(t, p.liveKey, res.body.id);
      await eventually(
        async () =>
          (await get(`/partner/v1/disbursements/${res.body.id}`, p.liveKey)).body.status === "DELIVERED",
      );
      const [row] = await sql<{ id: string }>(
        t.app.orm.em.fork(),
        "select id from installments where disbursement_id = $1",
        [res.body.id],
      );
      installments.push(row?.id as string);
    }
    clock.advance(31 * ms.day);
    // Each debit is left pending at the provider, as a charge still being processed.
    fake.chargeStatus = () => ({ status: "ongoing", gatewayResponse: "" });
    for (const id of installments) {
      expect(await t.app.services.repayments.collect(t.app.orm.em.fork(), id)).toBe("SCHEDULED");
    }
    // The provider completes them, then tells us by webhook, all at once.
    for (const id of installments) {
      const charge = fake.charges.get(`${id}:1`);
      if (!charge) throw new Error(`no charge for ${id}`);
      Object.assign(charge, { status: "success", gatewayResponse: "Approved" });
    }
    const url = `${t.partnerUrl}${PAYSTACK_WEBHOOK_PATH}`;
    const answers = await burst(
      installments.map((id) => async () => {
        const status = await fake.sendWebhook(url, "charge.success", { reference: `${id}:1` });
        return { status, headers: new Headers(), body: undefined };
      }),
    );
    expect(statuses(answers)).toEqual([200]);
    expect(
      await count("select 1 from installments where id = any($1::text[]) and status = 'COLLECTED'", [
        installments,
      ]),
    ).toBe(N);
    expect(
      await count(
        "select 1 from events where type = 'REPAYMENT_COLLECTED' and partner_id = $1 and environment = 'production'",
        [p.partnerId],
      ),
    ).toBe(N);
  });
});
