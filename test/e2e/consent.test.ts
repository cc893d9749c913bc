import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { constructWebhookEvent } from "../../src/sdk/webhooks.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { openPage, submit } from "../support/consent-page.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

let t: TestApp;
let a: PartnerFixture;
let b: PartnerFixture;
let receiver: TestReceiver;
let secret: string;

beforeAll(async () => {
  t = await startTestApp();
  [a, b] = await Promise.all([createPartner(t, "Acme Lending"), createPartner(t)]);
  receiver = await startReceiver();
  secret = (await createWebhook(t.partnerUrl, a.sandboxKey, { url: receiver.url, events: ["consent.*"] }))
    .secret;
});
afterAll(async () => {
  await receiver?.close();
  await t?.stop();
});

/** The next verified event of a type about a consent, as the partner's receiver gets it. */
async function received(type: string, consentId: string) {
  const got = await eventually(
    () =>
      receiver.received.find((r) => {
        const body = JSON.parse(r.body);
        return body.type === type && body.payload.consentId === consentId;
      }),
    { what: `${type} for ${consentId}` },
  );
  return constructWebhookEvent<Record<string, unknown>>({
    payload: got.body,
    signatureHeader: got.headers["x-service-signature"] as string,
    secret,
  });
}

const link = (key: string, body: Record<string, unknown>) =>
  rest(t.partnerUrl, "POST", "/partner/v1/consent-links", { key, body });

describe("dashboard consent", () => {
  it("grants from the dashboard, then revokes: both events delivered, the record shows REVOKED and revokedAt", async () => {
    const u = await createUser(t);
    const { consent } = await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: a.partnerId,
      scopes: ["standing", "ledger"],
      ledgerWindowDays: 90,
      maxLedgerWindowDays: 365,
    });
    const id = consent?.id as string;
    const granted = await received("consent.granted", id);
    expect(granted.payload).toMatchObject({
      userId: u.userId,
      scopes: ["standing", "ledger"],
      source: "DASHBOARD",
    });

    const read = await rest(t.partnerUrl, "GET", `/partner/v1/consents/${id}`, { key: a.sandboxKey });
    expect(read.body).toMatchObject({
      id,
      status: "ACTIVE",
      source: "DASHBOARD",
      ledgerWindowDays: 90,
      maxLedgerWindowDays: 365,
    });

    await t.internal.consents.revokeConsent({ consentId: id });
    const revoked = await received("consent.revoked", id);
    expect(revoked.payload).toMatchObject({ revokedBy: "USER", status: "REVOKED" });
    const after = await rest(t.partnerUrl, "GET", `/partner/v1/consents/${id}`, { key: a.sandboxKey });
    expect(after.body).toMatchObject({ status: "REVOKED", revokedBy: "USER", revokedAt: expect.any(String) });

    const list = await t.internal.consents.listUserConsents({ userId: u.userId });
    expect(list.consents.map((c) => [c.partnerName, c.consent?.id])).toEqual([["Acme Lending", id]]);
  });

  it("supersedes the previous consent with a new grant, and lets the partner revoke", async () => {
    const u = await createUser(t);
    const first = await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: a.partnerId,
      scopes: ["kyc"],
      ledgerWindowDays: 30,
    });
    const second = await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: a.partnerId,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    const old = await rest(t.partnerUrl, "GET", `/partner/v1/consents/${first.consent?.id}`, {
      key: a.sandboxKey,
    });
    expect(old.body).toMatchObject({
      status: "REVOKED",
      revokedBy: "SYSTEM",
      supersededBy: second.consent?.id,
    });
    const current = await rest(t.partnerUrl, "GET", `/partner/v1/users/${u.userId}/consent`, {
      key: a.sandboxKey,
    });
    expect(current.body).toMatchObject({ id: second.consent?.id, status: "ACTIVE" });

    const revoked = await rest(t.partnerUrl, "POST", `/partner/v1/consents/${second.consent?.id}/revoke`, {
      key: a.sandboxKey,
      body: {},
    });
    expect(revoked.body).toMatchObject({ status: "REVOKED", revokedBy: "PARTNER" });
    expect((await received("consent.revoked", second.consent?.id as string)).payload).toMatchObject({
      revokedBy: "PARTNER",
    });
  });
});

describe("concurrent grants", () => {
  it("leave exactly one ACTIVE consent, every grant succeeding", async () => {
    const u = await createUser(t);
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        t.internal.consents.grantConsent({
          userId: u.userId,
          partnerId: a.partnerId,
          scopes: ["standing"],
          ledgerWindowDays: 30,
        }),
      ),
    );
    expect(new Set(results.map((r) => r.consent?.id)).size).toBe(10);
    const list = await t.internal.consents.listUserConsents({ userId: u.userId });
    expect(list.consents.filter((c) => c.consent?.status === 1 /* ACTIVE */)).toHaveLength(1);
  });
});

describe("consent links", () => {
  it("validates every field with the contract's codes", async () => {
    const ok = { phoneNumber: "+2348011112222", scopes: ["standing"], ledgerWindowDays: 30 };
    const cases: [Record<string, unknown>, number, string][] = [
      [{ ...ok, scopes: ["standing", "bvn"] }, 400, "invalid_scope"],
      [{ ...ok, phoneNumber: "08011112222" }, 400, "invalid_phone_number"],
      [{ ...ok, ledgerWindowDays: 366 }, 422, "validation_failed"],
      [{ ...ok, ledgerWindowDays: 90, maxLedgerWindowDays: 60 }, 422, "validation_failed"],
      [{ ...ok, scopes: [] }, 422, "validation_failed"],
      [{ ...ok, expiresInHours: 169 }, 422, "validation_failed"],
      [{ ...ok, expiresInHours: 0 }, 422, "validation_failed"],
      [{ ...ok, redirectUrl: "javascript:alert(1)" }, 422, "validation_failed"],
    ];
    for (const [body, status, code] of cases) {
      const res = await link(a.sandboxKey, body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(res.body.code).toBe(code);
    }
    const created = await link(a.sandboxKey, ok);
    expect(created.body).toMatchObject({
      id: expect.stringMatching(/^cnl_/),
      url: expect.stringMatching(/\/consent\/[0-9A-Za-z]{32}$/),
      status: "PENDING",
      phoneNumberLast4: "2222",
      scopes: ["standing"],
      maxLedgerWindowDays: 30,
    });
    expect(JSON.stringify(created.body)).not.toContain("2348011112222");
    expect(Date.parse(created.body.expiresAt) - Date.parse(created.body.createdAt)).toBe(24 * 3_600_000);
  });

  it("accepts through the page: writes the consent, emits consent.granted, and the link is then used", async () => {
    const u = await createUser(t);
    const created = await link(a.sandboxKey, {
      phoneNumber: u.phoneNumber,
      scopes: ["standing", "signals.cashflow"],
      ledgerWindowDays: 30,
      maxLedgerWindowDays: 90,
    });
    const url = created.body.url as string;
    const page = await openPage(url);
    expect(page.status).toBe(200);
    expect(page.html).toContain("Acme Lending");
    expect(page.html).toContain("Cashflow signals");
    expect(page.cookie).toMatch(/^consent_csrf=/);

    const accepted = await submit(url, page, "accept");
    expect(accepted.status).toBe(200);
    expect(await accepted.text()).toContain("Thank you");
    const after = await rest(t.partnerUrl, "GET", `/partner/v1/consent-links/${created.body.id}`, {
      key: a.sandboxKey,
    });
    expect(after.body).toMatchObject({ status: "ACCEPTED", consentId: expect.stringMatching(/^cns_/) });
    const event = await received("consent.granted", after.body.consentId);
    expect(event.payload).toMatchObject({
      userId: u.userId,
      source: "CONSENT_LINK",
      scopes: ["standing", "signals.cashflow"],
    });

    // Replaying the accepted form does nothing: 410, and still one consent.
    const replay = await submit(url, page, "accept");
    expect(replay.status).toBe(410);
    const again = await submit(url, page, "accept", { accept: "application/json" });
    expect(again.status).toBe(410);
    expect((await again.json()).code).toBe("consent_link_gone");
    const used = await openPage(url);
    expect(used.status).toBe(410);
    expect(used.html).toContain("already been used");
    const current = await rest(t.partnerUrl, "GET", `/partner/v1/users/${u.userId}/consent`, {
      key: a.sandboxKey,
    });
    expect(current.body.id).toBe(after.body.consentId);
  });

  it("refuses cross-site posts and forged forms", async () => {
    const u = await createUser(t);
    const created = await link(a.sandboxKey, {
      phoneNumber: u.phoneNumber,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    const url = created.body.url as string;
    const page = await openPage(url);
    const attempts = [
      await submit(url, page, "accept", { origin: "https://evil.example" }),
      await submit(url, page, "accept", { omitCookie: true }),
      await submit(url, page, "accept", { csrf: "0".repeat(64) }),
    ];
    for (const res of attempts) expect(res.status).toBe(403);
    const still = await rest(t.partnerUrl, "GET", `/partner/v1/consent-links/${created.body.id}`, {
      key: a.sandboxKey,
    });
    expect(still.body.status).toBe("PENDING");
  });

  it("declines, and redirects with the outcome when asked", async () => {
    const u = await createUser(t);
    const created = await link(a.sandboxKey, {
      phoneNumber: u.phoneNumber,
      scopes: ["kyc"],
      ledgerWindowDays: 30,
      redirectUrl: "https://lender.example/after?x=1",
    });
    const page = await openPage(created.body.url);
    const res = await submit(created.body.url, page, "decline");
    expect(res.status).toBe(303);
    const to = new URL(res.headers.get("location") as string);
    expect(to.origin + to.pathname).toBe("https://lender.example/after");
    expect(Object.fromEntries(to.searchParams)).toEqual({
      x: "1",
      outcome: "declined",
      consent_link_id: created.body.id,
    });
    const after = await rest(t.partnerUrl, "GET", `/partner/v1/consent-links/${created.body.id}`, {
      key: a.sandboxKey,
    });
    expect(after.body).toMatchObject({ status: "DECLINED", consentId: "" });
  });

  it("follows SPEC.md's recovery path from consent_revoked to a new current consent", async () => {
    const u = await createUser(t);
    const { consent } = await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: a.partnerId,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    await t.internal.consents.revokeConsent({ consentId: consent?.id as string });
    // 1. read the consent: REVOKED with revokedAt
    const read = await rest(t.partnerUrl, "GET", `/partner/v1/consents/${consent?.id}`, {
      key: a.sandboxKey,
    });
    expect(read.body).toMatchObject({ status: "REVOKED", revokedAt: expect.any(String) });
    // 2. a new link, 3. the person accepts it
    const created = await link(a.sandboxKey, {
      phoneNumber: u.phoneNumber,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    const page = await openPage(created.body.url);
    expect((await submit(created.body.url, page, "accept")).status).toBe(200);
    // 4. consent.granted arrives, 5. the new consent is the user's current one
    const linkNow = await rest(t.partnerUrl, "GET", `/partner/v1/consent-links/${created.body.id}`, {
      key: a.sandboxKey,
    });
    await received("consent.granted", linkNow.body.consentId);
    const current = await rest(t.partnerUrl, "GET", `/partner/v1/users/${u.userId}/consent`, {
      key: a.sandboxKey,
    });
    expect(current.body).toMatchObject({ id: linkNow.body.consentId, status: "ACTIVE" });
  });
});

describe("isolation", () => {
  it("shows a partner's sandbox consents to no other partner and not to its own live key", async () => {
    const u = await createUser(t);
    const { consent } = await t.internal.consents.grantConsent({
      userId: u.userId,
      partnerId: a.partnerId,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    const created = await link(a.sandboxKey, {
      phoneNumber: u.phoneNumber,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    for (const key of [b.sandboxKey, a.liveKey]) {
      for (const path of [
        `/partner/v1/consents/${consent?.id}`,
        `/partner/v1/users/${u.userId}/consent`,
        `/partner/v1/consent-links/${created.body.id}`,
      ]) {
        const res = await rest(t.partnerUrl, "GET", path, { key });
        expect(res.status, path).toBe(404);
        expect(res.body.code).toBe("not_found");
      }
      const revoke = await rest(t.partnerUrl, "POST", `/partner/v1/consents/${consent?.id}/revoke`, {
        key,
        body: {},
      });
      expect(revoke.status).toBe(404);
    }
    expect(
      (await rest(t.partnerUrl, "GET", `/partner/v1/consents/${consent?.id}`, { key: a.sandboxKey })).body
        .status,
    ).toBe("ACTIVE");
  });

  it("validates users fed by the platform", async () => {
    for (const [body, field] of [
      [{ id: "usr_ok1", phoneNumber: "123", segment: "trader" }, "phoneNumber"],
      [{ id: "usr_ok2", phoneNumber: "+2348000000999", segment: "farmer" }, "segment"],
      [{ id: "user-1", phoneNumber: "+2348000000998", segment: "gig" }, "id"],
    ] as const) {
      await expect(t.internal.users.upsertUser(body)).rejects.toSatisfy(
        (err: { rawMessage: string }) => err.rawMessage.length > 0,
      );
      void field;
    }
  });
});
