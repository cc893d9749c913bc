import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Delivery_Status, WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { sql } from "../../src/platform/db/sql.ts";
import type { EventType } from "../../src/webhooks/event-types.ts";
import { createWebhook, raiseEvent } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, grpcUnary, rest } from "../support/clients.ts";
import { type Received, startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

// What the portal shows of a subscription (issue 17): deliveries by status, each delivery's attempts with the
// headers the receiver got, hourly stats, "replay every failed delivery since", and the recent events.
let t: TestApp;
let receiver: TestReceiver;
const SIGNATURE_HEADERS = [
  "x-service-signature",
  "webhook-id",
  "webhook-timestamp",
  "webhook-signature",
  "x-service-event-id",
  "x-service-delivery-id",
];

beforeAll(async () => {
  t = await startTestApp();
  // REPAYMENT_FAILED events fail with a 503 asking for an hour (so nothing retries during the test); a body
  // says why. Every other event is taken.
  receiver = await startReceiver((r) =>
    r.body.includes('"type":"REPAYMENT_FAILED"')
      ? { status: 503, body: "busy, come back later", headers: { "retry-after": "3600" } }
      : { status: 200, body: "thanks" },
  );
});
afterAll(async () => {
  await receiver?.close();
  await t?.stop();
});

const get = (path: string, key: string) => rest(t.partnerUrl, "GET", path, { key });
const post = (path: string, key: string, body: unknown, headers?: Record<string, string>) =>
  rest(t.partnerUrl, "POST", path, { key, body, headers });
const got = (deliveryId: string) =>
  receiver.received.filter((r) => r.headers["x-service-delivery-id"] === deliveryId);

/** Raises events of the given types for the partner and waits until each delivery has had its first attempt. */
async function deliver(p: PartnerFixture, hookId: string, types: EventType[]): Promise<string[]> {
  const ids: string[] = [];
  for (const type of types) {
    const raised = await raiseEvent(t.app, { partnerId: p.partnerId, environment: "sandbox", type });
    ids.push(...raised.deliveryIds);
  }
  await eventually(async () => {
    const page = await get(`/partner/v1/webhooks/${hookId}/deliveries?limit=100`, p.sandboxKey);
    return page.body.deliveries.every((d: { attempt: number }) => d.attempt >= 1);
  });
  return ids;
}

describe("ListDeliveryAttempts", () => {
  it("lists each attempt with its answer, latency and the signature headers the receiver got", async () => {
    const p = await createPartner(t);
    const hook = await createWebhook(t.partnerUrl, p.sandboxKey, { url: receiver.url, events: ["*"] });
    const [failed, ok] = await deliver(p, hook.id, ["REPAYMENT_FAILED", "consent.granted"]);

    const res = await get(`/partner/v1/deliveries/${failed}/attempts`, p.sandboxKey);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(1);
    const [attempt] = res.body;
    expect(attempt).toMatchObject({
      attempt: 1,
      succeeded: false,
      statusCode: 503,
      error: "",
      responseBody: "busy, come back later",
    });
    expect(attempt.latencyMs).toBeGreaterThanOrEqual(0);
    expect(Date.parse(attempt.startedAt)).toBeGreaterThan(Date.now() - 60_000);
    const [sent] = got(failed as string) as [Received];
    expect(Object.keys(attempt.signatureHeaders).sort()).toEqual([...SIGNATURE_HEADERS].sort());
    for (const h of SIGNATURE_HEADERS) expect(attempt.signatureHeaders[h]).toBe(sent.headers[h]);
    // The secret itself is never kept with the attempt.
    const raw = await sql<{ h: string }>(
      t.app.orm.em.fork(),
      "select signature_headers::text as h from webhook_attempts where delivery_id = $1",
      [failed],
    );
    expect(raw[0]?.h).not.toContain(hook.secret);
    expect(raw[0]?.h).not.toContain(hook.secret.slice("whsec_".length));

    // The same over Connect and gRPC.
    const viaConnect = await connectClient(
      WebhookService,
      t.partnerUrl,
      `Bearer ${p.sandboxKey}`,
    ).listDeliveryAttempts({ id: ok as string });
    expect(viaConnect.attempts).toHaveLength(1);
    expect(viaConnect.attempts[0]).toMatchObject({
      statusCode: 200,
      succeeded: true,
      responseBody: "thanks",
    });
    expect(viaConnect.attempts[0]?.signatureHeaders["x-service-delivery-id"]).toBe(ok);
    const viaGrpc = await grpcUnary(
      t.partnerUrl,
      WebhookService.method.listDeliveryAttempts,
      { id: ok as string },
      { authorization: `Bearer ${p.sandboxKey}` },
    );
    expect(viaGrpc.ok && viaGrpc.message.attempts[0]?.signatureHeaders["webhook-signature"]).toBe(
      (got(ok as string)[0] as Received).headers["webhook-signature"],
    );
  });
});

describe("ListDeliveries by status", () => {
  it("returns exactly the deliveries in the statuses asked for, newest first, with paging", async () => {
    const p = await createPartner(t);
    const hook = await createWebhook(t.partnerUrl, p.sandboxKey, { url: receiver.url, events: ["*"] });
    const ids = await deliver(p, hook.id, [
      "REPAYMENT_FAILED",
      "consent.granted",
      "REPAYMENT_FAILED",
      "consent.revoked",
      "REPAYMENT_FAILED",
    ]);
    const [f1, d1, f2, d2, f3] = ids as [string, string, string, string, string];
    // One of the failed ones is given up (as 14 days of failures would).
    await sql(
      t.app.orm.em.fork(),
      `update webhook_deliveries set status = 'GIVEN_UP', next_attempt_at = null, given_up_at = now() where id = $1`,
      [f3],
    );
    const ofStatus = async (q: string) =>
      (await get(`/partner/v1/webhooks/${hook.id}/deliveries?${q}`, p.sandboxKey)).body.deliveries.map(
        (d: { id: string }) => d.id,
      );
    expect(await ofStatus("status=FAILED")).toEqual([f2, f1]);
    expect(await ofStatus("status=DELIVERED")).toEqual([d2, d1]);
    expect(await ofStatus("status=GIVEN_UP")).toEqual([f3]);
    expect(await ofStatus("status=PENDING")).toEqual([]);
    expect(await ofStatus("status=FAILED&status=GIVEN_UP")).toEqual([f3, f2, f1]);
    expect(await ofStatus("")).toEqual([f3, d2, f2, d1, f1]);

    const first = await get(
      `/partner/v1/webhooks/${hook.id}/deliveries?status=FAILED&status=GIVEN_UP&limit=2`,
      p.sandboxKey,
    );
    expect(first.body).toMatchObject({ hasMore: true });
    expect(first.body.deliveries.map((d: { id: string }) => d.id)).toEqual([f3, f2]);
    const rest2 = await get(
      `/partner/v1/webhooks/${hook.id}/deliveries?status=FAILED&status=GIVEN_UP&limit=2&starting_after=${f2}`,
      p.sandboxKey,
    );
    expect(rest2.body).toMatchObject({ hasMore: false });
    expect(rest2.body.deliveries.map((d: { id: string }) => d.id)).toEqual([f1]);

    const viaConnect = await connectClient(
      WebhookService,
      t.partnerUrl,
      `Bearer ${p.sandboxKey}`,
    ).listDeliveries({ webhookId: hook.id, status: [Delivery_Status.DELIVERED] });
    expect(viaConnect.deliveries.map((d) => d.id)).toEqual([d2, d1]);

    const bad = await get(`/partner/v1/webhooks/${hook.id}/deliveries?status=LOST`, p.sandboxKey);
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect(bad.status).toBeLessThan(500);
  });
});

describe("GetWebhookStats", () => {
  it("gives 24 hourly buckets that add up to the subscription's own stats", async () => {
    const p = await createPartner(t);
    const hook = await createWebhook(t.partnerUrl, p.sandboxKey, { url: receiver.url, events: ["*"] });
    await deliver(p, hook.id, ["REPAYMENT_FAILED", "consent.granted", "consent.revoked"]);
    const res = await get(`/partner/v1/webhooks/${hook.id}/stats`, p.sandboxKey);
    expect(res.status).toBe(200);
    const { buckets, total } = res.body;
    expect(buckets).toHaveLength(24);
    const starts = buckets.map((b: { startTime: string }) => Date.parse(b.startTime));
    for (let i = 1; i < 24; i++) expect(starts[i] - starts[i - 1]).toBe(3_600_000);
    expect(Math.abs(starts[0] - (Date.now() - 24 * 3_600_000))).toBeLessThan(60_000);
    const sum = (k: "delivered" | "failed") =>
      buckets.reduce((n: number, b: Record<string, number>) => n + (b[k] ?? 0), 0);
    expect({ delivered: sum("delivered"), failed: sum("failed") }).toEqual({ delivered: 2, failed: 1 });
    const webhook = (await get(`/partner/v1/webhooks/${hook.id}`, p.sandboxKey)).body;
    expect(total).toEqual(webhook.stats);
    expect(total).toMatchObject({ delivered: 2, failed: 1 });
    expect(buckets[23]).toMatchObject({ delivered: 2, failed: 1 });
    expect(buckets[23].p95LatencyMs).toBeGreaterThanOrEqual(buckets[23].p50LatencyMs ?? 0);
  });
});

describe("ReplayFailedDeliveries", () => {
  it("replays exactly the failed and given-up deliveries since the time, once, and is idempotent", async () => {
    const p = await createPartner(t);
    const hook = await createWebhook(t.partnerUrl, p.sandboxKey, { url: receiver.url, events: ["*"] });
    const ids = await deliver(p, hook.id, [
      "REPAYMENT_FAILED",
      "REPAYMENT_FAILED",
      "consent.granted",
      "REPAYMENT_FAILED",
      "REPAYMENT_FAILED",
    ]);
    const [old, f1, , f2, gone] = ids as [string, string, string, string, string];
    const em = t.app.orm.em.fork();
    await sql(em, "update webhook_deliveries set created_at = now() - interval '3 days' where id = $1", [
      old,
    ]);
    await sql(
      em,
      `update webhook_deliveries set status = 'GIVEN_UP', next_attempt_at = null, given_up_at = now() where id = $1`,
      [gone],
    );
    const since = new Date(Date.now() - 2 * 86_400_000).toISOString();
    const key = { "idempotency-key": `replay-failed-${hook.id}` };
    const res = await post(`/partner/v1/webhooks/${hook.id}/replay-failed`, p.sandboxKey, { since }, key);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ queued: 3, hasMore: false });

    const replays = await sql<{ id: string; replay_of: string; event_id: string }>(
      em,
      "select id, replay_of, event_id from webhook_deliveries where webhook_id = $1 and replay_of is not null",
      [hook.id],
    );
    expect(replays.map((r) => r.replay_of).sort()).toEqual([f1, f2, gone].sort());
    // Each replay is sent: the same event body, a new delivery id.
    for (const r of replays) {
      const [sent] = await eventually(() => (got(r.id).length > 0 ? got(r.id) : undefined));
      expect(sent?.headers["x-service-event-id"]).toBe(r.event_id);
      expect(sent?.body).toBe((got(r.replay_of)[0] as Received).body);
    }

    const again = await post(`/partner/v1/webhooks/${hook.id}/replay-failed`, p.sandboxKey, { since }, key);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(res.body);
    // A new call finds the originals already replayed (the replays themselves failed again, and are new).
    await eventually(async () => {
      const failed = await get(`/partner/v1/webhooks/${hook.id}/deliveries?status=FAILED`, p.sandboxKey);
      return failed.body.deliveries.filter((d: { replayOf: string }) => d.replayOf).length === 3;
    });
    const next = await post(`/partner/v1/webhooks/${hook.id}/replay-failed`, p.sandboxKey, { since });
    expect(next.body).toEqual({ queued: 3, hasMore: false });
    const count = await sql<{ n: number }>(
      em,
      "select count(*)::int as n from webhook_deliveries where webhook_id = $1 and replay_of = any($2::text[])",
      [hook.id, [f1, f2, gone]],
    );
    expect(count[0]?.n).toBe(3);
  });
});

describe("ListEvents", () => {
  it("lists the caller's delivered events newest first, by type, with paging, and no one else's", async () => {
    const [p, other] = await Promise.all([createPartner(t), createPartner(t)]);
    const hook = await createWebhook(t.partnerUrl, p.sandboxKey, {
      url: receiver.url,
      events: ["consent.*"],
    });
    await createWebhook(t.partnerUrl, other.sandboxKey, { url: receiver.url, events: ["*"] });
    const e1 = await raiseEvent(t.app, {
      partnerId: p.partnerId,
      environment: "sandbox",
      type: "consent.granted",
    });
    // Not subscribed: never delivered, so not listed (as GetEvent answers 404 for it).
    await raiseEvent(t.app, { partnerId: p.partnerId, environment: "sandbox", type: "REPAYMENT_FAILED" });
    const e2 = await raiseEvent(t.app, {
      partnerId: p.partnerId,
      environment: "sandbox",
      type: "consent.revoked",
    });
    const e3 = await raiseEvent(t.app, {
      partnerId: p.partnerId,
      environment: "sandbox",
      type: "consent.granted",
    });
    await raiseEvent(t.app, { partnerId: other.partnerId, environment: "sandbox", type: "consent.granted" });
    await raiseEvent(t.app, { partnerId: p.partnerId, environment: "production", type: "consent.granted" });
    expect(hook.id).toMatch(/^whk_/);

    const list = await get("/partner/v1/events", p.sandboxKey);
    expect(list.status).toBe(200);
    expect(list.body.hasMore).toBe(false);
    expect(list.body.events.map((e: { id: string }) => e.id)).toEqual([e3.eventId, e2.eventId, e1.eventId]);
    expect(list.body.events[0]).toMatchObject({ type: "consent.granted", payload: { id: e3.eventId } });

    const granted = await get("/partner/v1/events?type=consent.granted", p.sandboxKey);
    expect(granted.body.events.map((e: { id: string }) => e.id)).toEqual([e3.eventId, e1.eventId]);

    const page1 = await get("/partner/v1/events?limit=2", p.sandboxKey);
    expect(page1.body.hasMore).toBe(true);
    const page2 = await get(`/partner/v1/events?limit=2&starting_after=${e2.eventId}`, p.sandboxKey);
    expect(page2.body).toMatchObject({ hasMore: false });
    expect(page2.body.events.map((e: { id: string }) => e.id)).toEqual([e1.eventId]);

    expect((await get("/partner/v1/events", p.liveKey)).body.events).toEqual([]);
    const bad = await get("/partner/v1/events?type=nope", p.sandboxKey);
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe("invalid_event_type");
  });
});
