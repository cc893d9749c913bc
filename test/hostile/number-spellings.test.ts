import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createConsentedUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

// docs/idempotency-and-errors.md, "Validation rules are part of the contract": the service enforces the rules
// on REST, Connect, gRPC-Web and gRPC alike, and "Money (and every 64-bit integer) is a decimal string in
// canonical form ("1500": no +, no leading zeros, no -0, no spaces) or a JSON integer of at most 2^53 - 1 ...
// Any other spelling ("0x10", " 5", "1e3") is 400 invalid_request, as a value of the wrong type is."
// REST holds this; Connect and gRPC-Web JSON read hex, octal and binary spellings, signs, spaces and leading
// zeros as money and create the disbursement ("0o17" is a loan of 15 kobo, "0b101" of 5).
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

const due = () => new Date(Date.now() + 20 * 86_400_000).toISOString().slice(0, 10);
const spellings = ["0x1388", "0o17", "0b101", " 5000", "5000 ", "+5000", "05000"];
let n = 0;
const loan = (userId: string, money: string) => ({
  userId,
  principalKobo: money,
  destination: "WALLET",
  reference: `spelling-${++n}`,
  repaymentSchedule: { installments: [{ dueDate: due(), amountKobo: money }] },
});
const created = async () =>
  (await rest(t.partnerUrl, "GET", "/partner/v1/disbursements?limit=100", { key: p.sandboxKey })).body
    .disbursements as { reference: string; principalKobo: string }[];

describe("money spelled other than canonically", () => {
  it("is refused on REST (as documented)", async () => {
    const user = await createConsentedUser(t, p.partnerId);
    for (const money of spellings) {
      const res = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
        key: p.sandboxKey,
        body: loan(user.userId, money),
        headers: { "idempotency-key": `rest-${n}` },
      });
      expect([money, res.status, res.body.code]).toEqual([money, 400, "invalid_request"]);
    }
  });

  it("is refused on Connect JSON the same way (invalid_argument, reason invalid_request), creating nothing", async () => {
    const user = await createConsentedUser(t, p.partnerId);
    const answers: unknown[] = [];
    for (const money of spellings) {
      const res = await fetch(`${t.partnerUrl}/partner.v1.DisbursementService/CreateDisbursement`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${p.sandboxKey}`,
          "content-type": "application/json",
          "connect-protocol-version": "1",
          "idempotency-key": `connect-${n}`,
        },
        body: JSON.stringify(loan(user.userId, money)),
      });
      const body = (await res.json()) as {
        code?: string;
        details?: { debug?: { reason?: string } }[];
        disbursement?: { principalKobo: string };
      };
      answers.push([
        money,
        res.status,
        body.code,
        body.details?.[0]?.debug?.reason,
        body.disbursement?.principalKobo,
      ]);
    }
    expect(answers).toEqual(spellings.map((m) => [m, 400, "invalid_argument", "invalid_request", undefined]));
    expect(await created()).toEqual([]);
  });

  it("is refused on gRPC-Web JSON too", async () => {
    const user = await createConsentedUser(t, p.partnerId);
    const json = Buffer.from(JSON.stringify(loan(user.userId, "0x10")));
    const frame = Buffer.alloc(5);
    frame.writeUInt32BE(json.length, 1);
    const res = await fetch(`${t.partnerUrl}/partner.v1.DisbursementService/CreateDisbursement`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${p.sandboxKey}`,
        "content-type": "application/grpc-web+json",
        "idempotency-key": "grpc-web-hex",
      },
      body: Buffer.concat([frame, json]),
    });
    const text = Buffer.from(await res.arrayBuffer()).toString("latin1");
    // grpc-status 3 (INVALID_ARGUMENT), in the trailers or a trailers-only answer's headers, and no disbursement
    // of 16 kobo.
    expect(res.headers.get("grpc-status") === "3" || text.includes("grpc-status:3"), text).toBe(true);
    expect(text).not.toContain('"principalKobo":"16"');
  });
});

describe("an int32 field sent as a string on REST", () => {
  it("is a value of the wrong type (the document says integer): 400 invalid_request", async () => {
    for (const days of ["0x1e", "1e1"]) {
      const res = await rest(t.partnerUrl, "POST", "/partner/v1/consent-links", {
        key: p.sandboxKey,
        body: { phoneNumber: "+2348000000001", scopes: ["standing"], ledgerWindowDays: days },
      });
      expect([days, res.status, res.body.code]).toEqual([days, 400, "invalid_request"]);
    }
  });
});
