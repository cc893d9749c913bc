import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Delivery_Status, WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { createWebhook, raiseEvent } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, errorInfoOf, rest } from "../support/clients.ts";
import { acceptMandate } from "../support/mandates.ts";
import { member } from "../support/portal.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

// What the portal looks up beside a subscription's lists: one delivery by its id (GetDelivery), and the events
// about one user, or about one disbursement or consent (ListEvents' `user_id` and `object_id`), on each face a
// partner or the portal uses.
let t: TestApp;
let receiver: TestReceiver;

beforeAll(async () => {
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 1000, refillPerSecond: 1000 },
        write: { capacity: 1000, refillPerSecond: 1000 },
      },
    },
  });
  receiver = await startReceiver(() => ({ status: 200, body: "thanks" }));
});
afterAll(async () => {
  await receiver?.close();
  await t?.stop();
});

const get = (path: string, key: string) => rest(t.partnerUrl, "GET", path, { key });
const post = (path: string, key: string, body?: unknown, headers?: Record<string, string>) =>
  rest(t.partnerUrl, "POST", path, { key, headers, ...(body === undefined ? {} : { body }) });
const types = (events: { type: string }[]) => events.map((e) => e.type);

describe("GetDelivery", () => {
  it("answers one delivery over REST, Connect and a portal session, as the deliveries list shows it", async () => {
    const p = await createPartner(t);
    const hook = await createWebhook(t.partnerUrl, p.sandboxKey, { url: receiver.url, events: ["*"] });
    const raised = await raiseEvent(t.app, {
      partnerId: p.partnerId,
      environment: "sandbox",
      type: "consent.granted",
    });
    const id = raised.deliveryIds[0] as string;
    const res = await eventually(async () => {
      const r = await get(`/partner/v1/deliveries/${id}`, p.sandboxKey);
      return r.body.status === "DELIVERED" ? r : undefined;
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id,
      webhookId: hook.id,
      eventId: raised.eventId,
      eventType: "consent.granted",
      attempt: 1,
      lastStatusCode: 200,
      lastResponseBody: "thanks",
      test: false,
    });
    const listed = await get(`/partner/v1/webhooks/${hook.id}/deliveries`, p.sandboxKey);
    expect(res.body).toEqual(listed.body.deliveries.find((d: { id: string }) => d.id === id));

    const viaConnect = await connectClient(
      WebhookService,
      t.partnerUrl,
      `Bearer ${p.sandboxKey}`,
    ).getDelivery({
      id,
    });
    expect(viaConnect.delivery).toMatchObject({ id, status: Delivery_Status.DELIVERED, lastStatusCode: 200 });
    // The portal calls the same method with a session instead of a key; a viewer may read it.
    const viewer = await member(t, systemClock, p.partnerId, "viewer");
    const viaPortal = await viewer.browser.client(WebhookService).getDelivery({ id });
    expect(viaPortal.delivery?.eventId).toBe(raised.eventId);
  });

  it("refuses an id not shaped like a delivery's, and answers 404 for one that is not the caller's", async () => {
    const p = await createPartner(t);
    for (const id of ["whk_01ARZ3NDEKTSV4RRFFQ69G5FAV", "dlv_short", "dlv_01arz3ndektsv4rrffq69g5fav"]) {
      const res = await get(`/partner/v1/deliveries/${id}`, p.sandboxKey);
      expect([res.status, res.body.code], id).toEqual([422, "validation_failed"]);
      expect(res.body.details.fields).toEqual({ id: "must be a delivery id (dlv_…)" });
    }
    const missing = await get("/partner/v1/deliveries/dlv_01ARZ3NDEKTSV4RRFFQ69G5FAV", p.sandboxKey);
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    const err = await connectClient(WebhookService, t.partnerUrl, `Bearer ${p.sandboxKey}`)
      .getDelivery({ id: "dlv_01ARZ3NDEKTSV4RRFFQ69G5FAV" })
      .catch((e: unknown) => e);
    expect(errorInfoOf(err)?.reason).toBe("not_found");
  });
});

describe("ListEvents by type", () => {
  it("names the unknown type it was asked for", async () => {
    const p = await createPartner(t);
    for (const type of ["bogus", "disbursement_delivered", "consent.*"]) {
      const res = await get(`/partner/v1/events?type=${encodeURIComponent(type)}`, p.sandboxKey);
      expect([res.status, res.body.code]).toEqual([400, "invalid_event_type"]);
      expect(res.body.message).toBe(`Unknown event type ${JSON.stringify(type)}.`);
    }
  });
});

describe("ListEvents by subject", () => {
  let p: PartnerFixture;
  let q: PartnerFixture;

  beforeAll(async () => {
    [p, q] = await Promise.all([createPartner(t), createPartner(t)]);
    await createWebhook(t.partnerUrl, p.sandboxKey, { url: receiver.url, events: ["*"] });
    await createWebhook(t.partnerUrl, q.sandboxKey, { url: receiver.url, events: ["*"] });
  });

  /** A consent of the fixture user with this phone number, through a link the sandbox helper accepts. */
  async function consentTo(key: string, phoneNumber: string): Promise<string> {
    const link = await post("/partner/v1/consent-links", key, {
      phoneNumber,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    expect(link.status, JSON.stringify(link.body)).toBe(200);
    const accepted = await post(`/partner/v1/sandbox/consent-links/${link.body.id}/accept`, key);
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(200);
    return accepted.body.consentId as string;
  }

  /** A disbursement to `usr_sandboxEstablished`, accepted and paid out; answers its id. */
  async function delivered(reference: string): Promise<string> {
    const created = await post(
      "/partner/v1/disbursements",
      p.sandboxKey,
      {
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
      { "idempotency-key": reference },
    );
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    await acceptMandate(t, p.sandboxKey, created.body.id);
    await eventually(
      async () =>
        (await get(`/partner/v1/disbursements/${created.body.id}`, p.sandboxKey)).body.status === "DELIVERED",
    );
    return created.body.id as string;
  }

  it("finds a disbursement's payout and repayment events by its id, and a user's events by theirs", async () => {
    const established = await consentTo(p.sandboxKey, "+2348000000002");
    const unrated = await consentTo(p.sandboxKey, "+2348000000004");
    expect((await post(`/partner/v1/sandbox/consents/${unrated}/revoke`, p.sandboxKey)).status).toBe(200);
    const dsb = await delivered(`subjects-${Date.now()}`);
    const other = await delivered(`subjects-other-${Date.now()}`);
    const [repayment] = (await get(`/partner/v1/disbursements/${dsb}/repayments`, p.sandboxKey)).body
      .repayments;
    const collect = (outcome: string) =>
      post(`/partner/v1/sandbox/repayments/${repayment.id}/collect`, p.sandboxKey, {
        outcome,
        ...(outcome === "FAILURE" ? { failureCode: "insufficient_funds" } : {}),
      });
    expect((await collect("FAILURE")).status).toBe(200);
    expect((await collect("SUCCESS")).status).toBe(200);
    // A synthetic test event names no subject: never found by these filters.
    const hooks = (await get("/partner/v1/webhooks", p.sandboxKey)).body;
    await post(`/partner/v1/webhooks/${hooks[0].id}/test`, p.sandboxKey, {
      eventType: "REPAYMENT_COLLECTED",
    });

    const byObject = (await get(`/partner/v1/events?object_id=${dsb}`, p.sandboxKey)).body;
    expect(types(byObject.events)).toEqual([
      "REPAYMENT_COLLECTED",
      "REPAYMENT_FAILED",
      "DISBURSEMENT_DELIVERED",
    ]);
    for (const e of byObject.events) expect(e.payload.payload.disbursementId).toBe(dsb);
    expect(types((await get(`/partner/v1/events?object_id=${other}`, p.sandboxKey)).body.events)).toEqual([
      "DISBURSEMENT_DELIVERED",
    ]);
    const byConsent = (await get(`/partner/v1/events?object_id=${unrated}`, p.sandboxKey)).body;
    expect(types(byConsent.events)).toEqual(["consent.revoked", "consent.granted"]);

    // The user who only gave and took back a consent: those two events, none of another user's.
    const byUser = (await get("/partner/v1/events?user_id=usr_sandboxUnrated", p.sandboxKey)).body;
    expect(byUser.events.map((e: { id: string }) => e.id)).toEqual(
      byConsent.events.map((e: { id: string }) => e.id),
    );
    // The borrower: their consent, both payouts and the repayment's two events, newest first.
    const borrower = (await get("/partner/v1/events?user_id=usr_sandboxEstablished", p.sandboxKey)).body;
    expect(types(borrower.events)).toEqual([
      "REPAYMENT_COLLECTED",
      "REPAYMENT_FAILED",
      "DISBURSEMENT_DELIVERED",
      "DISBURSEMENT_DELIVERED",
      "consent.granted",
    ]);
    expect(borrower.events[4].payload.payload.consentId).toBe(established);
    // Filters together must all hold; a page at a time as every list.
    const both = await get(
      `/partner/v1/events?user_id=usr_sandboxEstablished&type=REPAYMENT_FAILED`,
      p.sandboxKey,
    );
    expect(types(both.body.events)).toEqual(["REPAYMENT_FAILED"]);
    const first = (await get(`/partner/v1/events?object_id=${dsb}&limit=2`, p.sandboxKey)).body;
    expect(first.hasMore).toBe(true);
    const next = (
      await get(
        `/partner/v1/events?object_id=${dsb}&limit=2&starting_after=${first.events[1].id}`,
        p.sandboxKey,
      )
    ).body;
    expect([...first.events, ...next.events]).toEqual(byObject.events);
    expect(next.hasMore).toBe(false);
    // Over Connect, as the portal calls it.
    const viaConnect = await connectClient(WebhookService, t.partnerUrl, `Bearer ${p.sandboxKey}`).listEvents(
      {
        objectId: dsb,
      },
    );
    expect(viaConnect.events.map((e) => e.id)).toEqual(byObject.events.map((e: { id: string }) => e.id));
  });

  it("finds nothing with another tenant's ids or from the other environment, and refuses ids of other kinds", async () => {
    const listed = (await get("/partner/v1/events", p.sandboxKey)).body.events as { payload: any }[];
    const mine = listed.filter((e) => !e.payload.test);
    const dsb = mine.find((e) => e.payload.payload.disbursementId)?.payload.payload.disbursementId;
    const cns = mine.find((e) => e.payload.payload.consentId)?.payload.payload.consentId;
    expect(dsb).toMatch(/^dsb_/);
    expect(cns).toMatch(/^cns_/);
    for (const query of [`object_id=${dsb}`, `object_id=${cns}`, "user_id=usr_sandboxEstablished"]) {
      for (const key of [q.sandboxKey, p.liveKey]) {
        const res = await get(`/partner/v1/events?${query}`, key);
        expect([res.status, res.body.events], query).toEqual([200, []]);
      }
    }
    for (const [query, field] of [
      ["object_id=evt_01ARZ3NDEKTSV4RRFFQ69G5FAV", "objectId"],
      ["object_id=usr_sandboxEstablished", "objectId"],
      ["user_id=dsb_01ARZ3NDEKTSV4RRFFQ69G5FAV-", "userId"],
      ["user_id=usr_", "userId"],
    ] as const) {
      const res = await get(`/partner/v1/events?${query}`, p.sandboxKey);
      expect([res.status, res.body.code], query).toEqual([422, "validation_failed"]);
      expect(Object.keys(res.body.details.fields)).toEqual([field]);
    }
  });
});
