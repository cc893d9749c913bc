import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scopes } from "../../src/consent/scopes.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { acceptMandate } from "../support/mandates.ts";
import { eventually } from "../support/wait.ts";

// Each sandbox partner has its own copy of the fixture users (CONTRACT.md §7): a re-score, a loan, its
// repayments and the ledger lines they write, by one partner, are never seen by another; and a reset restores
// the partner's copy as documented.

let t: TestApp;
let a: PartnerFixture;
let b: PartnerFixture;

beforeAll(async () => {
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 1000, refillPerSecond: 1000 },
        write: { capacity: 1000, refillPerSecond: 1000 },
      },
    },
  });
  a = await createPartner(t);
  b = await createPartner(t);
  for (const p of [a, b])
    await createWebhook(t.partnerUrl, p.sandboxKey, { url: "http://127.0.0.1:9/hooks", events: ["*"] });
});
afterAll(() => t?.stop());

const USER = "usr_sandboxTrusted";
const PHONE = "+2348000000001";
const post = (key: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  rest(t.partnerUrl, "POST", path, {
    key,
    ...(body === undefined ? {} : { body }),
    ...(headers && { headers }),
  });
const get = (key: string, path: string) => rest(t.partnerUrl, "GET", path, { key });

async function consent(p: PartnerFixture) {
  const link = await post(p.sandboxKey, "/partner/v1/consent-links", {
    phoneNumber: PHONE,
    scopes: [...scopes],
    ledgerWindowDays: 365,
  });
  expect(link.status).toBe(200);
  expect((await post(p.sandboxKey, `/partner/v1/sandbox/consent-links/${link.body.id}/accept`)).status).toBe(
    200,
  );
}

/** The parts of a snapshot that describe the user (not the read: its id, time, consent and signature). */
async function view(p: PartnerFixture) {
  const res = await get(p.sandboxKey, `/partner/v1/users/${USER}/snapshot?ledger_window_days=365`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const { standing, signals, ledgerWindow, kyc, repaymentHistory } = res.body;
  return { standing, signals, ledgerWindow, kyc, repaymentHistory };
}

async function lend(p: PartnerFixture, reference: string) {
  const res = await post(
    p.sandboxKey,
    "/partner/v1/disbursements",
    {
      userId: USER,
      principalKobo: "5000000",
      destination: "WALLET",
      reference,
      repaymentSchedule: {
        installments: [
          {
            dueDate: new Date(Date.now() + 10 * 86_400_000).toISOString().slice(0, 10),
            amountKobo: "2750000",
          },
          {
            dueDate: new Date(Date.now() + 40 * 86_400_000).toISOString().slice(0, 10),
            amountKobo: "2750000",
          },
        ],
      },
    },
    { "idempotency-key": reference },
  );
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  await acceptMandate(t, p.sandboxKey, res.body.id);
  return res.body.id as string;
}

describe("sandbox partners", () => {
  it("each see their own copy of the fixture users; a reset restores it and touches no one else", async () => {
    await consent(a);
    await consent(b);
    const pristine = await view(b);
    expect(await view(a)).toEqual(pristine);
    expect(pristine.standing).toMatchObject({ tier: "Trusted", score: 812 });
    expect(pristine.repaymentHistory.loansTaken).toBe(2);

    // A re-scores the user, lends to them and collects a repayment (ledger, books, history).
    const rescored = await post(a.sandboxKey, `/partner/v1/sandbox/users/${USER}/standing`, {
      tier: "Emerging",
      score: 300,
    });
    expect(rescored.body).toMatchObject({ tier: "Emerging", score: 300, tierChanged: true });
    const loan = await lend(a, "iso-loan");
    await eventually(
      async () => (await get(a.sandboxKey, `/partner/v1/disbursements/${loan}`)).body.status === "DELIVERED",
    );
    const [first] = (await get(a.sandboxKey, `/partner/v1/disbursements/${loan}/repayments`)).body.repayments;
    expect(
      (await post(a.sandboxKey, `/partner/v1/sandbox/repayments/${first.id}/collect`, { outcome: "SUCCESS" }))
        .status,
    ).toBe(200);

    const seenByA = await view(a);
    expect(seenByA.standing).toMatchObject({ tier: "Emerging", score: 300 });
    expect(seenByA.repaymentHistory).toMatchObject({ loansTaken: 3, loansActive: 1 });
    expect(BigInt(seenByA.ledgerWindow.outflow.totalKobo)).toBe(
      BigInt(pristine.ledgerWindow.outflow.totalKobo) + 2_750_000n,
    );
    // The collection's line names A (`lender:<id>`) in A's scope: a counterparty A counts and B never does.
    expect(seenByA.ledgerWindow.outflow.distinctCounterparties).toBe(
      pristine.ledgerWindow.outflow.distinctCounterparties + 1,
    );
    // B sees the user exactly as before, and heard nothing of A's re-score.
    expect(await view(b)).toEqual(pristine);
    const heard = await sql(
      t.app.orm.em.fork(),
      "select 1 from events where partner_id = $1 and type = 'standing.tier_changed'",
      [b.partnerId],
    );
    expect(heard).toEqual([]);

    // A resets: its copy is as documented again, its consents, loans and books are gone; B is untouched.
    const reset = await post(a.sandboxKey, "/partner/v1/sandbox/reset", {});
    expect(reset.status, JSON.stringify(reset.body)).toBe(200);
    expect(reset.body).toMatchObject({
      consents: 1,
      consentLinks: 1,
      disbursements: 1,
      standings: 1,
      ledgerEntries: 1,
    });
    expect((await get(a.sandboxKey, `/partner/v1/users/${USER}/snapshot`)).body.code).toBe(
      "consent_required",
    );
    expect((await get(a.sandboxKey, `/partner/v1/disbursements/${loan}`)).status).toBe(404);
    expect((await get(a.sandboxKey, "/partner/v1/books")).body.entries).toEqual([]);
    await consent(a);
    expect(await view(a)).toEqual(pristine);
    expect(await view(b)).toEqual(pristine);
    // The same idempotency key makes a new loan: the old answer went with the reset.
    expect(await lend(a, "iso-loan")).not.toBe(loan);
  });

  it("cannot reset while a payout is at the payment provider (409), nor with a live key (403)", async () => {
    const p = await createPartner(t);
    await consent(p);
    const held = await lend(p, "iso-held_pending");
    await eventually(
      async () => (await get(p.sandboxKey, `/partner/v1/disbursements/${held}`)).body.status === "PROCESSING",
    );
    const busy = await post(p.sandboxKey, "/partner/v1/sandbox/reset", {});
    expect(busy.status).toBe(409);
    expect(busy.body.code).toBe("conflict");
    expect((await get(p.sandboxKey, `/partner/v1/disbursements/${held}`)).status).toBe(200);
    expect((await post(p.sandboxKey, `/partner/v1/sandbox/disbursements/${held}/fail`)).status).toBe(200);
    expect((await post(p.sandboxKey, "/partner/v1/sandbox/reset", {})).status).toBe(200);
    const live = await post(p.liveKey, "/partner/v1/sandbox/reset", {});
    expect(live.status).toBe(403);
    expect(live.body.code).toBe("sandbox_only");
  });
});
