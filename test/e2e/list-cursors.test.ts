import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConsentService } from "../../gen/partner/v1/consents_pb.ts";
import { DisbursementService } from "../../gen/partner/v1/disbursements_pb.ts";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { newId } from "../../src/platform/ids.ts";
import { createWebhook, raiseEvent } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, errorInfoOf, rest } from "../support/clients.ts";

// One answer to a page cursor on every list (CONTRACT.md §1, docs/idempotency-and-errors.md): an id that is
// shaped right but is not one of the caller's items of that list (one that never was, another partner's,
// another list's) is 400 `invalid_argument`; a value not shaped like an id of the list breaks its documented
// pattern and is 422 `validation_failed` naming `startingAfter`; the books' cursor is opaque, so anything
// that is not one of theirs is 400.

let t: TestApp;
let p: PartnerFixture;
let q: PartnerFixture;
let hook = "";
let theirEvent = "";
let otherHooksDelivery = "";
let mine = { delivery: "", event: "" };

beforeAll(async () => {
  t = await startTestApp();
  [p, q] = await Promise.all([createPartner(t), createPartner(t)]);
  const url = "http://127.0.0.1:9/hooks";
  hook = (await createWebhook(t.partnerUrl, p.sandboxKey, { url, events: ["consent.*"] })).id;
  // A second subscription of the caller's, which alone receives repayment events.
  await createWebhook(t.partnerUrl, p.sandboxKey, { url, events: ["REPAYMENT_*"] });
  await createWebhook(t.partnerUrl, q.sandboxKey, { url, events: ["*"] });
  const raise = (partnerId: string, type: "consent.granted" | "REPAYMENT_FAILED") =>
    raiseEvent(t.app, { partnerId, environment: "sandbox", type });
  const own = await raise(p.partnerId, "consent.granted");
  mine = { delivery: own.deliveryIds[0] ?? "", event: own.eventId ?? "" };
  otherHooksDelivery = (await raise(p.partnerId, "REPAYMENT_FAILED")).deliveryIds[0] ?? "";
  theirEvent = (await raise(q.partnerId, "consent.granted")).eventId ?? "";
});
afterAll(() => t?.stop());

const get = (path: string) => rest(t.partnerUrl, "GET", path, { key: p.sandboxKey });

describe("a page cursor", () => {
  it("that is well formed but not one of the list's is 400 invalid_argument on every list, REST and Connect", async () => {
    const deliveries = `/partner/v1/webhooks/${hook}/deliveries`;
    const unknown: [string, string][] = [
      ["/partner/v1/consents", newId("cns")],
      ["/partner/v1/consent-links", newId("cnl")],
      ["/partner/v1/disbursements", newId("dsb")],
      ["/partner/v1/events", newId("evt")],
      // Another partner's event.
      ["/partner/v1/events", theirEvent],
      [deliveries, newId("dlv")],
      // A delivery of the caller's, to another of its subscriptions.
      [deliveries, otherHooksDelivery],
      ["/partner/v1/books", Buffer.alloc(48, 7).toString("base64url")],
    ];
    for (const [path, cursor] of unknown) {
      const res = await get(`${path}?starting_after=${cursor}`);
      expect([res.status, res.body.code], `${path} ${cursor}`).toEqual([400, "invalid_argument"]);
      expect(res.body.message, path).toMatch(/^starting_after is not/);
    }
    const authorization = `Bearer ${p.sandboxKey}`;
    const consents = connectClient(ConsentService, t.partnerUrl, authorization);
    const disbursements = connectClient(DisbursementService, t.partnerUrl, authorization);
    const webhooks = connectClient(WebhookService, t.partnerUrl, authorization);
    const reasons = await Promise.all(
      [
        consents.listConsents({ startingAfter: newId("cns") }),
        consents.listConsentLinks({ startingAfter: newId("cnl") }),
        disbursements.listDisbursements({ startingAfter: newId("dsb") }),
        disbursements.getBooks({ startingAfter: "AAAA" }),
        webhooks.listEvents({ startingAfter: newId("evt") }),
        webhooks.listDeliveries({ webhookId: hook, startingAfter: otherHooksDelivery }),
      ].map((call) => call.then(() => "ok").catch((err: unknown) => errorInfoOf(err)?.reason)),
    );
    expect(reasons).toEqual(Array(6).fill("invalid_argument"));
  });

  it("that is one of the list's pages on; one not shaped like an id of the list is 422 naming it", async () => {
    expect(
      (await get(`/partner/v1/webhooks/${hook}/deliveries?starting_after=${mine.delivery}`)).status,
    ).toBe(200);
    expect((await get(`/partner/v1/events?starting_after=${mine.event}`)).status).toBe(200);
    for (const path of [
      "/partner/v1/consents",
      "/partner/v1/consent-links",
      "/partner/v1/disbursements",
      "/partner/v1/events",
      `/partner/v1/webhooks/${hook}/deliveries`,
    ]) {
      // An id of another list is not shaped like one of this list's.
      const res = await get(`${path}?starting_after=${newId("whk")}`);
      expect([res.status, res.body.code], path).toEqual([422, "validation_failed"]);
      expect(Object.keys(res.body.details.fields), path).toEqual(["startingAfter"]);
    }
  });
});
