import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
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
      webhooks: {
        ...loadConfig({}).webhooks,
        connectTimeoutMs: 500,
        timeoutMs: 200,
        sweepIntervalMs: 3_600_000,
      },
    },
  });
  partner = await createPartner(t);
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await t?.stop();
});

const now = () => clock.now().getTime();

async function delivery(id: string) {
  const [row] = await sql<Record<string, any>>(
    t.app.orm.em.fork(),
    "select * from webhook_deliveries where id = $1",
    [id],
  );
  return row as Record<string, any>;
}
async function attempts(id: string) {
  return sql<Record<string, any>>(
    t.app.orm.em.fork(),
    "select * from webhook_attempts where delivery_id = $1 order by attempt",
    [id],
  );
}
async function sendTest(webhookId: string, eventType?: string) {
  const res = await rest(t.partnerUrl, "POST", `/partner/v1/webhooks/${webhookId}/test`, {
    key: partner.sandboxKey,
    body: eventType ? { eventType } : {},
  });
  expect(res.status).toBe(200);
  return res.body as { id: string; eventId: string; status: string; test: boolean };
}
/** Waits until the worker has recorded `n` attempts for the delivery. */
const attemptsReach = (id: string, n: number) =>
  eventually(async () => ((await attempts(id)).length >= n ? attempts(id) : undefined), {
    what: `${n} attempts of ${id}`,
  });

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

  it("gives up an endpoint that never answers 14 days after the event, on the schedule, and not one attempt later", async () => {
    const hook = await createWebhook(t.partnerUrl, partner.sandboxKey, { url: receiver.url, events: ["*"] });
    receiver.answer = () => "hang";
    const d = await sendTest(hook.id);
    const created = (await delivery(d.id)).created_at.getTime();
    await attemptsReach(d.id, 1);
    for (let guard = 0; guard < 60; guard++) {
      const row = await delivery(d.id);
      if (row.status === "GIVEN_UP") break;
      expect(row.status).toBe("FAILED");
      clock.set(row.next_attempt_at);
      await t.app.services.deliveryWorker.processBatch(t.app.orm.em.fork(), [d.id]);
    }
    const final = await delivery(d.id);
    expect(final.status).toBe("GIVEN_UP");
    expect(final.given_up_at.getTime()).toBe(created + retrySchedule.windowMs);
    const all = await attempts(d.id);
    expect(all.every((a) => !a.succeeded && a.error === "timeout")).toBe(true);
    // Every gap follows the schedule: the n-th wait is its delay plus at most 10 % (the last one is cut at 14 days).
    const starts = all.map((a) => a.started_at.getTime());
    for (let i = 1; i < starts.length; i++) {
      const base = retrySchedule.delaysMs[i - 1] ?? retrySchedule.thenEveryMs;
      const gap = (starts[i] as number) - (starts[i - 1] as number);
      if (i < starts.length - 1) expect(gap).toBeGreaterThanOrEqual(base);
      expect(gap).toBeLessThanOrEqual(Math.round(base * 1.1) + 1);
    }
    expect(starts.at(-1)).toBe(created + retrySchedule.windowMs);
    expect(all.length).toBeGreaterThanOrEqual(retrySchedule.delaysMs.length + 12);
    // Long after: nothing is due, nothing is swept, nothing is sent. Only this delivery's requests are counted
    // (the clock's jumps make earlier tests' deliveries due too), and against its recorded attempts: a request
    // can reach the receiver after its attempt timed out, when the machine is busy.
    const sentOfThis = () =>
      receiver.received.filter((r) => r.headers["x-service-delivery-id"] === d.id).length;
    clock.advance(30 * ms.day);
    await t.app.services.deliveryWorker.sweep(t.app.orm.em.fork());
    await t.app.services.deliveryWorker.processBatch(t.app.orm.em.fork(), [d.id]);
    expect((await attempts(d.id)).length).toBe(all.length);
    expect(sentOfThis()).toBeLessThanOrEqual(all.length);
    receiver.release();
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
