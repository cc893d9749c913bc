import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Disbursement_Destination, DisbursementService } from "../../gen/partner/v1/disbursements_pb.ts";
import { ManualClock } from "../../src/platform/clock.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createConsentedUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { errorInfoOf, rest } from "../support/clients.ts";
import { member } from "../support/portal.ts";

// docs/idempotency-and-errors.md and docs/disbursements.md: creating a disbursement requires an
// Idempotency-Key (400 idempotency_key_required). docs/portal.md: a session is just another credential for the
// same API calls. An API key is refused without the header on every face; a portal session is not, so a
// double-clicked "Create" in the portal (or a retried request of the portal's script) pays the loan twice.
const clock = new ManualClock();
let t: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp({ clock });
  p = await createPartner(t);
});
afterAll(() => t?.stop());

const due = () => new Date(clock.now().getTime() + 20 * 86_400_000).toISOString().slice(0, 10);

describe("a portal session creating a disbursement", () => {
  it("without an Idempotency-Key is refused 400 idempotency_key_required, as an API key is", async () => {
    const user = await createConsentedUser(t, p.partnerId);
    // The API key: refused (the contract's behaviour).
    const withKey = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
      key: p.sandboxKey,
      body: {
        userId: user.userId,
        principalKobo: "5000",
        destination: "WALLET",
        reference: "key-no-idem",
        repaymentSchedule: { installments: [{ dueDate: due(), amountKobo: "5000" }] },
      },
    });
    expect([withKey.status, withKey.body.code]).toEqual([400, "idempotency_key_required"]);

    // The same create with a portal session (Connect, as the portal sends it), no Idempotency-Key.
    const admin = await member(t, clock, p.partnerId, "admin");
    const disbursements = admin.browser.client(DisbursementService);
    const create = (reference: string) =>
      disbursements.createDisbursement({
        userId: user.userId,
        principalKobo: 5000n,
        destination: Disbursement_Destination.WALLET,
        reference,
        repaymentSchedule: { installments: [{ dueDate: due(), amountKobo: 5000n }] },
      });
    let outcome: string;
    try {
      const res = await create("session-no-idem");
      outcome = `created ${res.disbursement?.id}`;
    } catch (err) {
      outcome = `${Code[ConnectError.from(err).code]} ${errorInfoOf(err)?.reason}`;
    }
    expect(outcome).toBe("InvalidArgument idempotency_key_required");

    // Nothing was created by the session's unkeyed request.
    const list = await rest(t.partnerUrl, "GET", "/partner/v1/disbursements", { key: p.sandboxKey });
    expect(list.body.disbursements.map((d: { reference: string }) => d.reference)).toEqual([]);
  });
});
