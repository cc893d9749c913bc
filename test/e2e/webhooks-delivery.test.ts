import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import {
  constructWebhookEvent,
  verifyWebhookSignature,
  WebhookVerificationError,
} from "../../src/sdk/webhooks.ts";
import { retrySchedule } from "../../src/webhooks/schedule.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { deliveryProbe } from "../support/deliveries.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

// The app's clock is ours to move: retries are driven by it, not by waiting.
const clock = new ManualClock("2027-03-01T08:00:00Z");
let t: TestApp;
let partner: PartnerFixture;
let receiver: TestReceiver;

beforeAll(async () => {
  t = await startTestApp({
    clock,
    config: {
      // The default time-outs: a busy machine must not turn a delivery into a timed-out attempt whose retry
      // waits on a clock that only the tests move (webhooks-give-up.test.ts tests time-outs).
      webhooks: { ...loadConfig({}).webhooks, sweepIntervalMs: 3_600_000 },
    },
  });
  partner = await createPartner(t);
  receiver = await startReceiver();
  probe = deliveryProbe(t, partner);
});
afterAll(async () => {
  await receiver?.close();
  await t?.stop();
});

const now = () => clock.now().getTime();
let probe: ReturnType<typeof deliveryProbe>;
const delivery = (id: string) => probe.delivery(id);
const attempts = (id: string) => probe.attempts(id);
const sendTest = (webhookId: string, eventType?: string) => probe.sendTest(webhookId, eventType);
const attemptsReach = (id: string, n: number) => probe.attemptsReach(id, n);

describe("signed deliveries", () => {
  it("delivers a signed test event that the SDK verifies, and rejects tampering, old timestamps and wrong secrets", async () => {
    const hook = await createWebhook(t.partnerUrl, partner.sandboxKey, {
      url: receiver.url,
      events: ["consent.*"],
    });
    expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const before = receiver.received.length;
    const d = await sendTest(hook.id);
    expect(d).toMatchObject({ status: "PENDING", test: true });
    // The attempt as recorded first: should it fail, its error says why (a time-out, a refused destination).
    const [first] = await attemptsReach(d.id, 1);
    expect({ succeeded: first?.succeeded, error: first?.error }).toEqual({ succeeded: true, error: null });
    const [got] = (await receiver.waitFor(before + 1)).slice(before);
    if (!got) throw new Error("nothing received");

    const header = got.headers["x-service-signature"] as string;
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    const event = await constructWebhookEvent({
      payload: got.body,
      signatureHeader: header,
      secret: hook.secret,
      now,
    });
    expect(event).toMatchObject({ id: d.eventId, type: "consent.granted", test: true });
    expect(got.headers["x-service-event-id"]).toBe(d.eventId);
    expect(got.headers["x-service-delivery-id"]).toBe(d.id);

    // Standard Webhooks: HMAC over id.t.body keyed with the decoded secret.
    const key = Buffer.from(hook.secret.slice("whsec_".length), "base64");
    const expected = createHmac("sha256", key)
      .update(`${got.headers["webhook-id"]}.${got.headers["webhook-timestamp"]}.${got.body}`)
      .digest("base64");
    expect(got.headers["webhook-id"]).toBe(d.eventId);
    expect(got.headers["webhook-signature"]).toBe(`v1,${expected}`);

    const rejects = async (o: Parameters<typeof verifyWebhookSignature>[0], code: string) => {
      const err = await verifyWebhookSignature(o).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WebhookVerificationError);
      expect((err as WebhookVerificationError).code).toBe(code);
    };
    await rejects(
      {
        payload: got.body.replace("consent.granted", "consent.revoked"),
        signatureHeader: header,
        secret: hook.secret,
        now,
      },
      "signature_mismatch",
    );
    await rejects(
      { payload: `${got.body} `, signatureHeader: header, secret: hook.secret, now },
      "signature_mismatch",
    );
    await rejects(
      { payload: got.body, signatureHeader: header, secret: hook.secret, now: () => now() + 301_000 },
      "timestamp_outside_tolerance",
    );
    await rejects(
      { payload: got.body, signatureHeader: header, secret: `whsec_${"A".repeat(43)}=`, now },
      "signature_mismatch",
    );
    await rejects(
      { payload: got.body, signatureHeader: undefined, secret: hook.secret, now },
      "missing_signature",
    );

    await eventually(async () => (await delivery(d.id)).status === "DELIVERED", { what: "DELIVERED" });
    const [a] = await attempts(d.id);
    expect(a).toMatchObject({ attempt: 1, succeeded: true, status_code: 200, response_body: "ok" });
  });

  it("signs with both secrets for 24 hours after a rotation", async () => {
    const hook = await createWebhook(t.partnerUrl, partner.sandboxKey, { url: receiver.url, events: ["*"] });
    const rotated = await rest(t.partnerUrl, "POST", `/partner/v1/webhooks/${hook.id}/rotate-secret`, {
      key: partner.sandboxKey,
      body: {},
    });
    expect(rotated.status).toBe(200);
    const fresh = rotated.body.secret as string;
    expect(fresh).not.toBe(hook.secret);
    expect(Date.parse(rotated.body.previousSecretExpiresAt) - now()).toBe(24 * ms.hour);
    const before = receiver.received.length;
    await sendTest(hook.id);
    const [got] = (await receiver.waitFor(before + 1)).slice(before);
    if (!got) throw new Error("nothing received");
    const header = got.headers["x-service-signature"] as string;
    expect(header.split(",").filter((p) => p.startsWith("v1="))).toHaveLength(2);
    for (const secret of [hook.secret, fresh]) {
      await verifyWebhookSignature({ payload: got.body, signatureHeader: header, secret, now });
    }
    expect((got.headers["webhook-signature"] as string).split(" ")).toHaveLength(2);
  });
});

describe("retries", () => {
  it("retries after a 500 and ends DELIVERED, with both attempts recorded", async () => {
    const hook = await createWebhook(t.partnerUrl, partner.sandboxKey, { url: receiver.url, events: ["*"] });
    const failFirst = receiver.received.length;
    receiver.answer = (_r, n) => (n === failFirst ? { status: 500, body: "boom" } : { status: 200 });
    const d = await sendTest(hook.id);
    const [first] = await attemptsReach(d.id, 1);
    expect(first).toMatchObject({ succeeded: false, status_code: 500, response_body: "boom" });
    const row = await delivery(d.id);
    expect(row.status).toBe("FAILED");
    const wait = row.next_attempt_at.getTime() - now();
    expect(wait).toBeGreaterThanOrEqual(retrySchedule.delaysMs[0]);
    expect(wait).toBeLessThanOrEqual(retrySchedule.delaysMs[0] * 1.1 + 1);
    // Time passes; the worker's wake-up for the due attempt arrives.
    clock.set(row.next_attempt_at);
    await t.app.services.deliveryWorker.processBatch(t.app.orm.em.fork(), [d.id]);
    const all = await attempts(d.id);
    expect(all.map((a) => [a.attempt, a.succeeded, a.status_code])).toEqual([
      [1, false, 500],
      [2, true, 200],
    ]);
    const done = await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${hook.id}/deliveries`, {
      key: partner.sandboxKey,
    });
    expect(done.body.deliveries[0]).toMatchObject({
      id: d.id,
      status: "DELIVERED",
      attempt: 2,
      lastStatusCode: 200,
    });
    receiver.answer = () => ({ status: 200 });
  });

  it("honours Retry-After on 429 within the schedule's bounds", async () => {
    const hook = await createWebhook(t.partnerUrl, partner.sandboxKey, { url: receiver.url, events: ["*"] });
    receiver.answer = () => ({ status: 429, headers: { "retry-after": "120" } });
    const d = await sendTest(hook.id);
    await attemptsReach(d.id, 1);
    const row = await delivery(d.id);
    expect(row.next_attempt_at.getTime() - now()).toBe(120_000);
    receiver.answer = () => ({ status: 200 });
  });

  it("gives up at once on 410 and disables the subscription", async () => {
    const hook = await createWebhook(t.partnerUrl, partner.sandboxKey, { url: receiver.url, events: ["*"] });
    receiver.answer = () => ({ status: 410 });
    const d = await sendTest(hook.id);
    await eventually(async () => (await delivery(d.id)).status === "GIVEN_UP", { what: "GIVEN_UP" });
    expect((await attempts(d.id)).length).toBe(1);
    const got = await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${hook.id}`, {
      key: partner.sandboxKey,
    });
    expect(got.body).toMatchObject({ status: "DISABLED", disabledReason: expect.stringContaining("410") });
    const again = await rest(t.partnerUrl, "POST", `/partner/v1/webhooks/${hook.id}/test`, {
      key: partner.sandboxKey,
      body: {},
    });
    expect(again.status).toBe(409);
    receiver.answer = () => ({ status: 200 });
  });

  it("re-queues a delivery whose wake-up was lost, through the sweeper", async () => {
    const hook = await createWebhook(t.partnerUrl, partner.sandboxKey, { url: receiver.url, events: ["*"] });
    receiver.answer = () => ({ status: 503 });
    const d = await sendTest(hook.id);
    await attemptsReach(d.id, 1);
    receiver.answer = () => ({ status: 200 });
    // The delayed wake-up runs on the database clock, far behind ours: only the sweeper can find it due.
    clock.set((await delivery(d.id)).next_attempt_at.getTime() + 10_000);
    expect(await t.app.services.deliveryWorker.sweep(t.app.orm.em.fork())).toBeGreaterThanOrEqual(1);
    await eventually(async () => (await delivery(d.id)).status === "DELIVERED", {
      what: "DELIVERED after sweep",
    });
  });
});

describe("deleting a subscription", () => {
  it("stops its pending deliveries before their next attempt", async () => {
    const hook = await createWebhook(t.partnerUrl, partner.sandboxKey, { url: receiver.url, events: ["*"] });
    receiver.answer = () => ({ status: 500 });
    const d = await sendTest(hook.id);
    await attemptsReach(d.id, 1);
    const del = await rest(t.partnerUrl, "DELETE", `/partner/v1/webhooks/${hook.id}`, {
      key: partner.sandboxKey,
    });
    expect(del.body).toMatchObject({ id: hook.id, deleted: true, deliveriesGivenUp: 1 });
    const received = receiver.received.length;
    clock.advance(ms.day);
    await t.app.services.deliveryWorker.sweep(t.app.orm.em.fork());
    await t.app.services.deliveryWorker.processBatch(t.app.orm.em.fork(), [d.id]);
    expect((await attempts(d.id)).length).toBe(1);
    expect(receiver.received.length).toBe(received);
    expect((await delivery(d.id)).status).toBe("GIVEN_UP");
    expect(
      (await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${hook.id}`, { key: partner.sandboxKey }))
        .status,
    ).toBe(404);
    receiver.answer = () => ({ status: 200 });
  });
});
