import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResolvedAddress } from "../../src/webhooks/destination.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createConsentedUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { openApiRequestProblems } from "../support/openapi-check.ts";

// The OpenAPI document against the server, on requests: the same inputs go to the running service over HTTP
// and to the document (through ajv, as every answer of the suite does), and each must be admitted by both or
// refused by both. The server refuses an input when it answers 400 or 422 in the contract's words for a value
// it will not take; it admits it when it does the work (200). Every case also says which it should be, so a
// document and a server that drift apart together still fail.

/** Every name resolves to one public address: a webhook's host is then decided by its URL alone. */
const resolver = async (): Promise<ResolvedAddress[]> => [{ address: "93.184.215.14", family: 4 }];
const REFUSALS = new Set([
  "invalid_request",
  "invalid_argument",
  "validation_failed",
  "invalid_phone_number",
  "invalid_scope",
  "invalid_event_type",
]);

let t: TestApp;
let p: PartnerFixture;
let liveHook = "";
let n = 0;

beforeAll(async () => {
  t = await startTestApp({
    resolver,
    config: {
      rateLimits: {
        read: { capacity: 2000, refillPerSecond: 2000 },
        write: { capacity: 2000, refillPerSecond: 2000 },
      },
    },
  });
  p = await createPartner(t);
  // A production subscription: local webhooks (http, loopback) are for sandbox subscriptions of a test
  // service only, and the document describes production.
  const hook = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
    key: p.liveKey,
    body: { url: "https://hooks.example.com/enums", events: ["*"] },
  });
  expect(hook.status, JSON.stringify(hook.body)).toBe(200);
  liveHook = hook.body.id;
});
afterAll(() => t?.stop());

/** One request, and whether each side should admit it. */
interface Case {
  name: string;
  method: "GET" | "POST" | "PATCH";
  path: string;
  body?: unknown | (() => Promise<unknown>);
  key?: string;
  admitted: boolean;
}

/** The cases whose server or document answer is not the one expected, in words. */
async function disagreements(cases: Case[]): Promise<string[]> {
  const found: string[] = [];
  for (const c of cases) {
    const body = typeof c.body === "function" ? await c.body() : c.body;
    const headers: Record<string, string> = c.method === "POST" ? { "idempotency-key": `oa-${n++}` } : {};
    const res = await rest(t.partnerUrl, c.method, c.path, { key: c.key ?? p.sandboxKey, body, headers });
    const refused = (res.status === 400 || res.status === 422) && REFUSALS.has(res.body?.code);
    if (res.status !== 200 && !refused)
      throw new Error(`${c.name}: neither done nor refused: ${res.status} ${JSON.stringify(res.body)}`);
    const problems = openApiRequestProblems(c.method, c.path, body);
    const server = res.status === 200;
    const document = problems.length === 0;
    if (server !== c.admitted || document !== c.admitted)
      found.push(
        `${c.name}: should be ${c.admitted ? "admitted" : "refused"}; the server ${server ? "admitted" : "refused"} ` +
          `it (${res.status} ${res.body?.code ?? ""}), the document ${document ? "admitted" : "refused"} it ` +
          `(${problems.join("; ").slice(0, 300)})`,
      );
  }
  return found;
}

const day = (d: number) => new Date(Date.now() + d * 86_400_000).toISOString().slice(0, 10);
const nextYear = new Date().getUTCFullYear() + 1;

/** A disbursement for a user who consented, with `fields` over a body that is admitted. */
const loan =
  (fields: Record<string, unknown> = {}, installment: Record<string, unknown> = {}) =>
  async () => ({
    userId: (await createConsentedUser(t, p.partnerId)).userId,
    principalKobo: "100000",
    destination: "WALLET",
    reference: `oa-${n++}`,
    repaymentSchedule: { installments: [{ dueDate: day(30), amountKobo: "110000", ...installment }] },
    ...fields,
  });
const lend = (name: string, admitted: boolean, fields: Record<string, unknown>) => ({
  name,
  method: "POST" as const,
  path: "/partner/v1/disbursements",
  body: loan(fields),
  admitted,
});
const installment = (name: string, admitted: boolean, fields: Record<string, unknown>) => ({
  name,
  method: "POST" as const,
  path: "/partner/v1/disbursements",
  body: loan({}, fields),
  admitted,
});

describe("the document admits what the server admits and refuses what it refuses", () => {
  it("money: kobo as a canonical decimal string, or a JSON integer, within the field's bounds", async () => {
    const cases: Case[] = [
      lend("a principal as a string", true, { principalKobo: "100000" }),
      lend("a principal as a number", true, { principalKobo: 100000 }),
      lend("the largest principal", true, { principalKobo: "1000000000000" }),
      lend("the largest principal as a number", true, { principalKobo: 1_000_000_000_000 }),
      lend("a principal of 0", false, { principalKobo: "0" }),
      lend("a negative principal", false, { principalKobo: "-5" }),
      lend("a principal past the largest", false, { principalKobo: "1000000000001" }),
      lend("a principal in hex", false, { principalKobo: "0x186a0" }),
      lend("a principal with a space before it", false, { principalKobo: " 100000" }),
      lend("a principal with a space after it", false, { principalKobo: "100000 " }),
      lend("a principal with a plus sign", false, { principalKobo: "+100000" }),
      lend("a principal with a leading zero", false, { principalKobo: "0100000" }),
      lend("a principal in exponent form", false, { principalKobo: "1e5" }),
      lend("a fractional principal", false, { principalKobo: 100000.5 }),
      lend("an empty principal", false, { principalKobo: "" }),
      lend("a principal of true", false, { principalKobo: true }),
      installment("an installment as a string", true, { amountKobo: "110000" }),
      installment("an installment as a number", true, { amountKobo: 110000 }),
      installment("an installment of 0", false, { amountKobo: "0" }),
      installment("an installment of -0", false, { amountKobo: "-0" }),
      installment("a negative installment", false, { amountKobo: "-1" }),
      installment("an installment with a decimal point", false, { amountKobo: "110000.0" }),
      installment("an installment past what a JSON number holds exactly", false, { amountKobo: 2 ** 53 }),
      installment("an installment past int64", false, { amountKobo: "9223372036854775808" }),
    ];
    expect(await disagreements(cases)).toEqual([]);
  });

  it("dates: real calendar days, within the field's range", async () => {
    const series = (from: string, admitted: boolean): Case => ({
      name: `books series of ${JSON.stringify(from)}`,
      method: "GET",
      path: `/partner/v1/books/series?from=${encodeURIComponent(from)}&to=${encodeURIComponent(from)}`,
      admitted,
    });
    const books = (from: string, admitted: boolean): Case => ({
      name: `books from ${JSON.stringify(from)}`,
      method: "GET",
      path: `/partner/v1/books?from=${encodeURIComponent(from)}`,
      admitted,
    });
    const cases: Case[] = [
      series("2028-02-29", true),
      series("2000-02-29", true),
      series("1970-01-01", true),
      series("9999-12-30", true),
      series("2027-02-29", false),
      series("1900-02-29", false),
      series("2026-02-30", false),
      series("2026-04-31", false),
      series("2026-13-01", false),
      series("2026-00-10", false),
      series("2026-1-1", false),
      series("20260615", false),
      series("2026-06-15T00:00:00Z", false),
      series("1969-12-31", false),
      series("0000-01-01", false),
      series("9999-12-31", false),
      books("", true),
      books("2028-02-29", true),
      books("2026-02-30", false),
      installment("a due date in a month's time", true, { dueDate: day(30) }),
      installment("a due date of February 30", false, { dueDate: `${nextYear}-02-30` }),
      installment("a due date in month 13", false, { dueDate: `${nextYear}-13-01` }),
      installment("a due date with a time", false, { dueDate: `${day(30)}T00:00:00Z` }),
    ];
    expect(await disagreements(cases)).toEqual([]);
  });

  it("webhook URLs: absolute https URLs with a host, in ASCII", async () => {
    const hook = (url: unknown, admitted: boolean): Case => ({
      name: `a webhook to ${JSON.stringify(url)}`,
      method: "POST",
      path: "/partner/v1/webhooks",
      key: p.liveKey,
      body: { url, events: ["*"] },
      admitted,
    });
    const cases: Case[] = [
      hook("https://hooks.example.com/h", true),
      hook("https://hooks.example.com", true),
      hook("https://hooks.example.com:8443/a/b?c=d&e=%20f#g", true),
      hook("https://93.184.215.14/h", true),
      hook("https://xn--r8jz45g.jp/h", true),
      hook("https://[64:ff9b::5db8:d70e]/h", true),
      hook("https://[64:ff9b::93.184.215.14]/h", false),
      hook("", false),
      hook("hooks.example.com/h", false),
      hook("/h", false),
      hook("https://", false),
      hook("https:hooks.example.com/h", false),
      hook("http://hooks.example.com/h", false),
      hook("ftp://hooks.example.com/h", false),
      hook("HTTPS://hooks.example.com/h", false),
      hook("https://user:secret@hooks.example.com/h", false),
      hook(" https://hooks.example.com/h", false),
      hook("https://hooks.example.com/h ", false),
      hook("https://hooks.example.com/a b", false),
      hook("https://hooks.example.com\\h", false),
      hook("https://hooks.example.com:99999/h", false),
      hook("https://例え.jp/h", false),
      hook("https://hooks.example.com/ü", false),
      hook(`https://hooks.example.com/${"a".repeat(2048)}`, false),
    ];
    expect(await disagreements(cases)).toEqual([]);
  });

  it("enums: the values' names, and a filter's STATUS_UNSPECIFIED as no filter", async () => {
    const deliveries = (query: string, admitted: boolean): Case => ({
      name: `deliveries ?${query}`,
      method: "GET",
      path: `/partner/v1/webhooks/${liveHook}/deliveries?${query}`,
      key: p.liveKey,
      admitted,
    });
    const list = (path: string, admitted: boolean): Case => ({ name: path, method: "GET", path, admitted });
    const cases: Case[] = [
      deliveries("status=STATUS_UNSPECIFIED", true),
      deliveries("status=FAILED", true),
      deliveries("status=FAILED&status=GIVEN_UP", true),
      deliveries("status=STATUS_UNSPECIFIED&status=FAILED", true),
      deliveries("status=failed", false),
      deliveries("status=RETRYING", false),
      deliveries(
        "status=PENDING&status=FAILED&status=DELIVERED&status=GIVEN_UP&status=STATUS_UNSPECIFIED",
        false,
      ),
      list("/partner/v1/consents?status=STATUS_UNSPECIFIED", true),
      list("/partner/v1/consents?status=REVOKED", true),
      list("/partner/v1/consents?status=PENDING", false),
      list("/partner/v1/consent-links?status=STATUS_UNSPECIFIED", true),
      list("/partner/v1/consent-links?status=LOCKED", true),
      list("/partner/v1/disbursements?status=STATUS_UNSPECIFIED", true),
      list("/partner/v1/disbursements?status=CANCELLED", true),
      list("/partner/v1/disbursements?status=CANCELED", false),
      lend("a destination of BANK", true, { destination: "BANK" }),
      lend("a destination not given", false, { destination: "DESTINATION_UNSPECIFIED" }),
      lend("a destination in lower case", false, { destination: "wallet" }),
    ];
    expect(await disagreements(cases)).toEqual([]);
  });

  it("null: the field's default where the rules take the default, refused where a value must be sent", async () => {
    const url = "https://hooks.example.com/null";
    const patch = (body: unknown, admitted: boolean): Case => ({
      name: `a webhook changed with ${JSON.stringify(body)}`,
      method: "PATCH",
      path: `/partner/v1/webhooks/${liveHook}`,
      key: p.liveKey,
      body,
      admitted,
    });
    const link = (fields: Record<string, unknown>, admitted: boolean): Case => ({
      name: `a consent link with ${JSON.stringify(fields)}`,
      method: "POST",
      path: "/partner/v1/consent-links",
      body: { phoneNumber: "+2348000000001", scopes: ["standing"], ledgerWindowDays: 30, ...fields },
      admitted,
    });
    const hook = (fields: Record<string, unknown>, admitted: boolean): Case => ({
      name: `a webhook with ${JSON.stringify(fields)}`,
      method: "POST",
      path: "/partner/v1/webhooks",
      key: p.liveKey,
      body: { url, events: ["*"], ...fields },
      admitted,
    });
    const cases: Case[] = [
      hook({ description: null }, true),
      hook({ url: null }, false),
      hook({ events: null }, false),
      patch({ url: null }, true),
      patch({ description: null }, true),
      patch({ addEvents: null, removeEvents: null }, true),
      patch({ url: "" }, false),
      link({ redirectUrl: null, expiresInHours: null, maxLedgerWindowDays: null }, true),
      link({ phoneNumber: null }, false),
      link({ scopes: null }, false),
      link({ ledgerWindowDays: null }, false),
      lend("a disbursement with null for the optional fields", true, {
        scheduleAcceptedAt: null,
        acceptanceExpiresInHours: null,
      }),
      lend("a null principal", false, { principalKobo: null }),
      lend("a null destination", false, { destination: null }),
      lend("a null reference", false, { reference: null }),
      lend("a null schedule", false, { repaymentSchedule: null }),
    ];
    expect(await disagreements(cases)).toEqual([]);
  });
});
