import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createConsentedUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

// docs/how-it-works.md: the server refuses unknown fields (request bodies are additionalProperties: false), and
// docs/idempotency-and-errors.md: the request rules are enforced "on REST, Connect, gRPC-Web and gRPC alike".
// REST refuses an unknown key with 400 invalid_request. Connect JSON drops it silently and goes on: a partner
// whose code misspells a field (acceptanceExpiresInHour for acceptanceExpiresInHours) gets a disbursement
// with the default terms instead of an error.
let t: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
});
afterAll(() => t?.stop());

const due = () => new Date(Date.now() + 20 * 86_400_000).toISOString().slice(0, 10);
const loan = (userId: string, reference: string) => ({
  userId,
  principalKobo: "5000",
  destination: "WALLET",
  reference,
  repaymentSchedule: { installments: [{ dueDate: due(), amountKobo: "5000" }] },
  // A typo of acceptanceExpiresInHours.
  acceptanceExpiresInHour: 1,
});

describe("an unknown field in a request body", () => {
  it("is 400 invalid_request on REST", async () => {
    const user = await createConsentedUser(t, p.partnerId);
    const res = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
      key: p.sandboxKey,
      body: loan(user.userId, "typo-rest"),
      headers: { "idempotency-key": "typo-rest" },
    });
    expect([res.status, res.body.code]).toEqual([400, "invalid_request"]);
  });

  it("is refused on Connect JSON too (invalid_argument, reason invalid_request), and nothing is created", async () => {
    const user = await createConsentedUser(t, p.partnerId);
    const res = await fetch(`${t.partnerUrl}/partner.v1.DisbursementService/CreateDisbursement`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${p.sandboxKey}`,
        "content-type": "application/json",
        "connect-protocol-version": "1",
        "idempotency-key": "typo-connect",
      },
      body: JSON.stringify(loan(user.userId, "typo-connect")),
    });
    const body = (await res.json()) as {
      code?: string;
      details?: { debug?: { reason?: string } }[];
      disbursement?: { acceptanceExpiresAt: string };
    };
    expect([res.status, body.code, body.details?.[0]?.debug?.reason]).toEqual([
      400,
      "invalid_argument",
      "invalid_request",
    ]);
    const list = await rest(t.partnerUrl, "GET", "/partner/v1/disbursements", { key: p.sandboxKey });
    expect(list.body.disbursements).toEqual([]);
  });
});
