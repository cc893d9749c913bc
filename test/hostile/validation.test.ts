import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

// Hostile values against the contract's protovalidate rules: huge, negative, out-of-type and wrong-format
// values get the contract's 4xx with the field named, never a 5xx, and a list far over its limit gets one
// short answer (its size), not one line per item.
let t: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 100_000, refillPerSecond: 100_000 },
        write: { capacity: 100_000, refillPerSecond: 100_000 },
      },
    },
  });
  p = await createPartner(t);
});
afterAll(() => t?.stop());

const call = (verb: string, path: string, body?: unknown) =>
  rest(t.partnerUrl, verb, path, { key: p.sandboxKey, body });
const link = { phoneNumber: "+2348000000001", scopes: ["standing"], ledgerWindowDays: 30 };
const loan = {
  userId: "usr_sandboxTrusted",
  principalKobo: "5000",
  destination: "WALLET",
  reference: "hostile-1",
  repaymentSchedule: { installments: [{ dueDate: "2099-01-01", amountKobo: "5000" }] },
};

describe("hostile values against the rules", () => {
  it("huge and negative numbers are the field's 422, at the int64 and int32 bounds too", async () => {
    const huge = await call("POST", "/partner/v1/disbursements", {
      ...loan,
      principalKobo: "9223372036854775807",
    });
    expect(huge.status).toBe(422);
    expect(huge.body.details.fields).toEqual({ principalKobo: "must be 1 to 1000000000000 kobo" });
    const negative = await call("POST", "/partner/v1/disbursements", {
      ...loan,
      principalKobo: "-9223372036854775808",
      repaymentSchedule: { installments: [{ dueDate: "2099-01-01", amountKobo: "-1" }] },
    });
    expect(negative.status).toBe(422);
    expect(Object.keys(negative.body.details.fields).sort()).toEqual([
      "principalKobo",
      "repaymentSchedule.installments[0].amountKobo",
    ]);
    const hours = await call("POST", "/partner/v1/consent-links", { ...link, expiresInHours: -2147483648 });
    expect(hours.body.details.fields).toEqual({ expiresInHours: "must be 1 to 168" });
    const window = await call(
      "GET",
      "/partner/v1/users/usr_sandboxTrusted/snapshot?ledger_window_days=2147483647",
    );
    expect([window.status, window.body.code]).toEqual([400, "invalid_ledger_window"]);
    const limit = await call("GET", "/partner/v1/books?limit=-1");
    expect(limit.body.details.fields).toEqual({ limit: "must be 1 to 1000" });
    const score = await call("POST", "/partner/v1/sandbox/users/usr_sandboxTrusted/standing", {
      tier: "Trusted",
      score: -1,
    });
    expect(score.body.details.fields).toEqual({ score: "must be 0 to 1000" });
  });

  it("wrong formats are refused by the rule, and real-calendar checks stay with the service", async () => {
    const phone = await call("POST", "/partner/v1/consent-links", {
      ...link,
      phoneNumber: `+234${"9".repeat(5000)}`,
    });
    expect([phone.status, phone.body.code]).toEqual([400, "invalid_phone_number"]);
    const unicode = await call("POST", "/partner/v1/disbursements", { ...loan, reference: "lóan-1" });
    expect(unicode.body.details.fields).toEqual({ reference: "must be 1 to 64 visible ASCII characters" });
    const longRef = await call("POST", "/partner/v1/disbursements", { ...loan, reference: "r".repeat(65) });
    expect(longRef.body.details.fields).toEqual({ reference: "must be 1 to 64 visible ASCII characters" });
    // Shaped like a date but not one: no pattern can tell, the service does (with an Idempotency-Key, so it
    // gets that far).
    const feb30 = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
      key: p.sandboxKey,
      body: { ...loan, repaymentSchedule: { installments: [{ dueDate: "2099-02-30", amountKobo: "5000" }] } },
      headers: { "idempotency-key": "hostile-feb-30" },
    });
    expect(feb30.status).toBe(422);
    expect(feb30.body.details.fields).toEqual({
      "repaymentSchedule.installments[0].dueDate": "must be a real date YYYY-MM-DD",
    });
    const books = await call("GET", "/partner/v1/books?from=2026-02-30");
    expect(books.body.details.fields).toEqual({
      from: "must be a real date YYYY-MM-DD from 1970-01-01 to 9999-12-30",
    });
    const cursor = await call(
      "GET",
      "/partner/v1/webhooks/whk_01J00000000000000000000000/deliveries?starting_after=dlv_%00",
    );
    expect(cursor.body.details.fields).toEqual({
      startingAfter: "must be a delivery id from a previous page",
    });
  });

  it("lists far over their limit get one short answer", async () => {
    const events = Array.from({ length: 5_000 }, (_, i) => `evil.${i}.*`);
    const hooks = await call("POST", "/partner/v1/webhooks", { url: "https://hooks.example.com/h", events });
    expect(hooks.status).toBe(422);
    expect(hooks.body.details.fields).toEqual({ events: "at most 20 filters" });
    const installments = Array.from({ length: 5_000 }, () => ({ dueDate: "garbage", amountKobo: "-1" }));
    const schedule = await call("POST", "/partner/v1/disbursements", {
      ...loan,
      repaymentSchedule: { installments },
    });
    expect(schedule.status).toBe(422);
    expect(schedule.body.details.fields).toEqual({ repaymentSchedule: "must have 1 to 60 installments" });
    // Unknown scopes are named back (the contract's invalid_scope details), each once per request item.
    const scopes = await call("POST", "/partner/v1/consent-links", {
      ...link,
      scopes: ["standing", "x".repeat(10_000)],
    });
    expect([scopes.status, scopes.body.code]).toEqual([400, "invalid_scope"]);
  });

  it("a path whose percent-encoding is malformed is 400 on every route, whatever the id would have been", async () => {
    for (const id of ["%E0%A4%A", "%zz", "%", "usr_sandboxTrusted%C0", "%C0%AF"]) {
      for (const path of [
        `/partner/v1/users/${id}/snapshot`,
        `/partner/v1/disbursements/${id}`,
        `/partner/v1/consents/${id}`,
      ]) {
        const res = await call("GET", path);
        expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(400);
        expect(res.body.code).toBe("invalid_argument");
      }
    }
    // A well-formed escape still names its id.
    expect((await call("GET", "/partner/v1/users/%75sr_unknown/snapshot")).body.code).toBe(
      "consent_required",
    );
  });

  it("values of the wrong type never reach the rules: the body is malformed", async () => {
    for (const body of [
      { ...loan, principalKobo: "1e3" },
      { ...loan, principalKobo: "99999999999999999999" },
      { ...loan, destination: "MOON" },
      { ...link, ledgerWindowDays: "thirty" },
      { ...link, scopes: "standing" },
    ]) {
      const path = "principalKobo" in body ? "/partner/v1/disbursements" : "/partner/v1/consent-links";
      const res = await call("POST", path, body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(res.body.code).toBe("invalid_request");
    }
  });
});
