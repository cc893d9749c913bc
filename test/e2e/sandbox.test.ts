import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scopes } from "../../src/consent/scopes.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { fixtureUsers } from "../../src/sandbox/fixtures.ts";
import { createSnapshotVerifier } from "../../src/sdk/snapshots.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { acceptMandate } from "../support/mandates.ts";
import { eventually } from "../support/wait.ts";

let t: TestApp;
let p: PartnerFixture;

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
  await createWebhook(t.partnerUrl, p.sandboxKey, { url: "http://127.0.0.1:9/hooks", events: ["*"] });
});
afterAll(() => t?.stop());

const post = (path: string, body?: unknown, key = p.sandboxKey) =>
  rest(t.partnerUrl, "POST", path, { key, ...(body === undefined ? {} : { body }) });
const get = (path: string, key = p.sandboxKey) => rest(t.partnerUrl, "GET", path, { key });
const events = async (type: string, text: string) =>
  (
    await sql(
      t.app.orm.em.fork(),
      "select 1 from events where partner_id = $1 and type = $2 and body like $3",
      [p.partnerId, type, `%${text}%`],
    )
  ).length;
const allScopes = [...scopes];

/** A consent for a fixture user, the way a partner gets one: a consent link, accepted by the sandbox helper. */
async function consentTo(phoneNumber: string, scopes = allScopes) {
  const link = await post("/partner/v1/consent-links", {
    phoneNumber,
    scopes,
    ledgerWindowDays: 365,
  });
  expect(link.status).toBe(200);
  const accepted = await post(`/partner/v1/sandbox/consent-links/${link.body.id}/accept`);
  expect(accepted.status).toBe(200);
  expect(accepted.body).toMatchObject({ status: "ACCEPTED", consentId: expect.stringMatching(/^cns_/) });
  return accepted.body.consentId as string;
}

describe("the sandbox fixture users", () => {
  it("are there for a new sandbox key from the first start, with a year of ledger, standing, KYC and a verifiable snapshot", async () => {
    await consentTo("+2348000000001");
    const res = await get("/partner/v1/users/usr_sandboxTrusted/snapshot?ledger_window_days=365");
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.standing).toMatchObject({ tier: "Trusted", score: 812 });
    expect(doc.kyc.level).toBe("FULL");
    expect(doc.ledgerWindow.days).toBe(365);
    expect(Number(doc.ledgerWindow.inflow.count)).toBeGreaterThan(1000);
    expect(doc.ledgerWindow.inflow.distinctCounterparties).toBeGreaterThan(30);
    expect(doc.repaymentHistory).toMatchObject({
      loansTaken: 2,
      loansRepaid: 2,
      loansActive: 0,
      maxDaysPastDue: 1,
    });
    const verifier = createSnapshotVerifier({
      baseUrl: t.partnerUrl,
      apiKey: p.sandboxKey,
      environment: "sandbox",
    });
    await verifier.verify(JSON.stringify(doc));
  });

  it("cover every tier, the three segments, a user without KYC and a default", async () => {
    expect(new Set(fixtureUsers.map((u) => u.tier))).toEqual(
      new Set(["Unrated", "Emerging", "Established", "Trusted"]),
    );
    expect(new Set(fixtureUsers.map((u) => u.segment))).toEqual(
      new Set(["trader", "salaried", "gig", "other"]),
    );
    await consentTo("+2348000000005");
    const noKyc = (await get("/partner/v1/users/usr_sandboxNoKyc/snapshot")).body;
    expect(noKyc.kyc.level).toBe("NONE");
    expect(noKyc.repaymentHistory).toBeUndefined();
    await consentTo("+2348000000006");
    const defaulted = (await get("/partner/v1/users/usr_sandboxDefaulted/snapshot")).body;
    expect(defaulted.repaymentHistory).toMatchObject({ loansTaken: 1, loansRepaid: 0 });
    expect(defaulted.repaymentHistory.maxDaysPastDue).toBeGreaterThanOrEqual(100);
    expect(defaulted.repaymentHistory.onTimeRateBps).toBe(3333);
    await consentTo("+2348000000002");
    const salaried = (await get("/partner/v1/users/usr_sandboxEstablished/snapshot?ledger_window_days=90"))
      .body;
    expect(salaried.signals.work.employmentVerified).toBe(true);
    expect(BigInt(salaried.ledgerWindow.inflow.totalKobo)).toBeGreaterThanOrEqual(
      3n * 42_000_000n - 42_000_000n,
    );
  });

  it("are seeded once: a restart on the same database adds nothing", async () => {
    const count = async () =>
      (await sql<{ n: string }>(t.app.orm.em.fork(), "select count(*)::text as n from ledger_entries", []))[0]
        ?.n;
    const before = await count();
    expect(await t.app.services.fixtures.ensure(t.app.orm.em.fork())).toEqual({ seeded: false, days: 0 });
    expect(await count()).toBe(before);
  });
});

describe("the sandbox helpers", () => {
  it("refuse a live key with 403 sandbox_only, on every helper", async () => {
    const paths = [
      "/partner/v1/sandbox/consent-links/cnl_01J00000000000000000000000/accept",
      "/partner/v1/sandbox/consent-links/cnl_01J00000000000000000000000/decline",
      "/partner/v1/sandbox/consents/cns_01J00000000000000000000000/revoke",
      "/partner/v1/sandbox/disbursements/dsb_01J00000000000000000000000/accept",
      "/partner/v1/sandbox/disbursements/dsb_01J00000000000000000000000/decline",
      "/partner/v1/sandbox/disbursements/dsb_01J00000000000000000000000/fail",
      "/partner/v1/sandbox/disbursements/dsb_01J00000000000000000000000/reverse",
      "/partner/v1/sandbox/reset",
    ];
    for (const path of paths) {
      const res = await post(path, undefined, p.liveKey);
      expect(res.status, path).toBe(403);
      expect(res.body.code).toBe("sandbox_only");
    }
    const standing = await post(
      "/partner/v1/sandbox/users/usr_sandboxTrusted/standing",
      { tier: "Emerging", score: 1 },
      p.liveKey,
    );
    expect(standing.body.code).toBe("sandbox_only");
    const collect = await post(
      "/partner/v1/sandbox/repayments/rpy_x/collect",
      { outcome: "SUCCESS" },
      p.liveKey,
    );
    expect(collect.body.code).toBe("sandbox_only");
  });

  it("decline a link as the user: DECLINED, no consent", async () => {
    const link = await post("/partner/v1/consent-links", {
      phoneNumber: "+2348000000003",
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    expect(link.status, JSON.stringify(link.body)).toBe(200);
    const declined = await post(`/partner/v1/sandbox/consent-links/${link.body.id}/decline`);
    expect(declined.body, JSON.stringify(declined.body)).toMatchObject({ status: "DECLINED", consentId: "" });
    const again = await post(`/partner/v1/sandbox/consent-links/${link.body.id}/accept`);
    expect(again.status).toBe(410);
    expect(again.body.code).toBe("consent_link_gone");
    const unknown = await post("/partner/v1/consent-links", {
      phoneNumber: "+2348000099999",
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    expect((await post(`/partner/v1/sandbox/consent-links/${unknown.body.id}/accept`)).status).toBe(409);
  });

  it("revoke a consent as the user, with consent.revoked by USER", async () => {
    const consentId = await consentTo("+2348000000004", ["standing"]);
    const res = await post(`/partner/v1/sandbox/consents/${consentId}/revoke`);
    expect(res.body).toMatchObject({ status: "REVOKED", revokedBy: "USER" });
    await eventually(async () => (await events("consent.revoked", consentId)) === 1);
    expect((await get("/partner/v1/users/usr_sandboxUnrated/snapshot")).body.code).toBe("consent_revoked");
  });

  it("re-score a user: a tier change reaches partners whose consent covers standing", async () => {
    await consentTo("+2348000000003", ["standing"]);
    const res = await post("/partner/v1/sandbox/users/usr_sandboxEmerging/standing", {
      tier: "Established",
      score: 610,
    });
    expect(res.body).toEqual({
      userId: "usr_sandboxEmerging",
      tier: "Established",
      score: 610,
      tierChanged: true,
    });
    expect(await events("standing.tier_changed", "usr_sandboxEmerging")).toBe(1);
    const doc = (await get("/partner/v1/users/usr_sandboxEmerging/snapshot")).body;
    expect(doc.standing).toMatchObject({ tier: "Established", score: 610 });
    expect(
      (await post("/partner/v1/sandbox/users/usr_nobody/standing", { tier: "Trusted", score: 1 })).status,
    ).toBe(404);
  });

  it("fail a pending payout and reverse a delivered one, through the payout path", async () => {
    await consentTo("+2348000000002", ["standing"]);
    const create = (reference: string) =>
      rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
        key: p.sandboxKey,
        headers: { "idempotency-key": reference },
        body: {
          userId: "usr_sandboxEstablished",
          principalKobo: "1000000",
          destination: "WALLET",
          reference,
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
      }).then(async (r) => {
        await acceptMandate(t, p.sandboxKey, r.body.id);
        return r;
      });
    const pending = await create("sbx-held_pending");
    await eventually(
      async () => (await get(`/partner/v1/disbursements/${pending.body.id}`)).body.status === "PROCESSING",
    );
    const failed = await post(`/partner/v1/sandbox/disbursements/${pending.body.id}/fail`);
    expect(failed.body).toMatchObject({ status: "FAILED", failureReason: "destination_unavailable" });
    expect((await post(`/partner/v1/sandbox/disbursements/${pending.body.id}/fail`)).status).toBe(409);

    const delivered = await create("sbx-reverse-me");
    await eventually(
      async () => (await get(`/partner/v1/disbursements/${delivered.body.id}`)).body.status === "DELIVERED",
    );
    const reversed = await post(`/partner/v1/sandbox/disbursements/${delivered.body.id}/reverse`);
    expect(reversed.body).toMatchObject({ status: "REVERSED", failureReason: "transfer_reversed" });
    const books = (await get("/partner/v1/books")).body;
    const mine = books.entries.filter(
      (e: { disbursementId: string }) => e.disbursementId === delivered.body.id,
    );
    expect(mine.map((e: { kind: string }) => e.kind).sort()).toEqual([
      "FEE",
      "FEE_REVERSED",
      "PRINCIPAL_OUT",
      "PRINCIPAL_REVERSED",
    ]);
    expect(mine.reduce((s: bigint, e: { amountKobo: string }) => s + BigInt(e.amountKobo), 0n)).toBe(0n);
    expect((await post(`/partner/v1/sandbox/disbursements/${delivered.body.id}/reverse`)).status).toBe(409);

    const collect = await create("sbx-collect");
    await eventually(
      async () => (await get(`/partner/v1/disbursements/${collect.body.id}`)).body.status === "DELIVERED",
    );
    const [repayment] = (await get(`/partner/v1/disbursements/${collect.body.id}/repayments`)).body
      .repayments;
    const fail = await post(`/partner/v1/sandbox/repayments/${repayment.id}/collect`, {
      outcome: "FAILURE",
      failureCode: "account_closed",
    });
    expect(fail.body).toMatchObject({ status: "SCHEDULED", attempts: 1, lastFailure: "account_closed" });
    expect(await events("REPAYMENT_FAILED", repayment.id)).toBe(1);
    const ok = await post(`/partner/v1/sandbox/repayments/${repayment.id}/collect`, { outcome: "SUCCESS" });
    expect(ok.body).toMatchObject({ status: "COLLECTED", attempts: 2 });
    expect(await events("REPAYMENT_COLLECTED", repayment.id)).toBe(1);
    expect(
      (await post(`/partner/v1/sandbox/repayments/${repayment.id}/collect`, { outcome: "SUCCESS" })).status,
    ).toBe(409);
    expect((await post(`/partner/v1/sandbox/repayments/${repayment.id}/collect`, {})).status).toBe(422);
  });
});
