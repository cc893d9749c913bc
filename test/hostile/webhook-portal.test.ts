import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { type Config, loadConfig } from "../../src/config.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { newId } from "../../src/platform/ids.ts";
import { createWebhook, raiseEvent } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, errorInfoOf, rest } from "../support/clients.ts";
import { member } from "../support/portal.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

// The portal's webhook reads and "replay every failed delivery since", attacked: other tenants' ids, the other
// environment, absurd times, limits at and past their bounds, a tight send bucket, and a subscription with
// thousands of failed deliveries and attempts.
let t: TestApp;
let receiver: TestReceiver;
let a: PartnerFixture;
let b: PartnerFixture;
let hookA: string;
let hookB: string;
let deliveryB: string;
const CAPACITY = 3;

const config = (): Partial<Config> => ({
  webhooks: {
    ...loadConfig({}).webhooks,
    sweepIntervalMs: 3_600_000,
    sendRateLimit: { capacity: CAPACITY, refillPerSecond: 0.5 },
  },
});

beforeAll(async () => {
  t = await startTestApp({ config: config() });
  receiver = await startReceiver(() => ({ status: 500, body: "down" }));
  [a, b] = await Promise.all([createPartner(t), createPartner(t)]);
  hookA = (await createWebhook(t.partnerUrl, a.sandboxKey, { url: receiver.url, events: ["*"] })).id;
  hookB = (await createWebhook(t.partnerUrl, b.sandboxKey, { url: receiver.url, events: ["*"] })).id;
  const raised = await raiseEvent(t.app, {
    partnerId: b.partnerId,
    environment: "sandbox",
    type: "consent.granted",
  });
  deliveryB = raised.deliveryIds[0] as string;
});
afterAll(async () => {
  await receiver?.close();
  await t?.stop();
});

const call = (method: string, path: string, key: string, body?: unknown) =>
  rest(t.partnerUrl, method, path, { key, body });

describe("tenancy", () => {
  it("answers 404 for another tenant's subscription or delivery, and 404 from the other environment", async () => {
    for (const key of [a.sandboxKey, b.liveKey]) {
      for (const [method, path, body] of [
        ["GET", `/partner/v1/deliveries/${deliveryB}`],
        ["GET", `/partner/v1/deliveries/${deliveryB}/attempts`],
        ["GET", `/partner/v1/webhooks/${hookB}/stats`],
        ["GET", `/partner/v1/webhooks/${hookB}/deliveries?status=FAILED`],
        ["POST", `/partner/v1/webhooks/${hookB}/replay-failed`, { since: new Date(Date.now() - 60_000) }],
      ] as const) {
        const res = await call(method, path, key, body);
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.body.code).toBe("not_found");
      }
    }
    // Events: B's event is not in A's list, nor in B's production list.
    await eventually(
      async () => (await call("GET", "/partner/v1/events", b.sandboxKey)).body.events.length === 1,
    );
    expect((await call("GET", "/partner/v1/events", a.sandboxKey)).body.events).toEqual([]);
    expect((await call("GET", "/partner/v1/events", b.liveKey)).body.events).toEqual([]);
    // A cursor from another tenant is no cursor.
    const cursor = (await call("GET", "/partner/v1/events", b.sandboxKey)).body.events[0].id;
    const foreign = await call("GET", `/partner/v1/events?starting_after=${cursor}`, a.sandboxKey);
    expect([foreign.status, foreign.body.code]).toEqual([400, "invalid_argument"]);
    // Ids of the wrong kind or shape.
    for (const id of ["whk_nope", "dlv_01ARZ3NDEKTSV4RRFFQ69G5FAV", "%2e%2e"]) {
      expect((await call("GET", `/partner/v1/webhooks/${id}/stats`, a.sandboxKey)).status).toBe(404);
      expect((await call("GET", `/partner/v1/deliveries/${id}/attempts`, a.sandboxKey)).status).toBe(404);
    }
  });
});

describe("GetDelivery", () => {
  it("answers another tenant's or the other environment's delivery exactly as a delivery that never was", async () => {
    const never = newId("dlv");
    const strip = (body: { requestId?: string }) => ({ ...body, requestId: undefined });
    const missing = await call("GET", `/partner/v1/deliveries/${never}`, a.sandboxKey);
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    for (const key of [a.sandboxKey, b.liveKey]) {
      const res = await call("GET", `/partner/v1/deliveries/${deliveryB}`, key);
      expect(res.status).toBe(404);
      expect(strip(res.body)).toEqual(strip({ ...missing.body, message: `No delivery ${deliveryB}.` }));
      expect(Object.keys(res.body).sort()).toEqual(Object.keys(missing.body).sort());
    }
    // Over Connect too, and from the portal's side: a session of another partner, and B's own in production.
    const notFound = (call: Promise<unknown>) =>
      call.then(
        () => "found",
        (e: unknown) => errorInfoOf(e)?.reason,
      );
    for (const key of [a.sandboxKey, b.liveKey])
      expect(
        await notFound(
          connectClient(WebhookService, t.partnerUrl, `Bearer ${key}`).getDelivery({ id: deliveryB }),
        ),
      ).toBe("not_found");
    const [viewerA, viewerB] = await Promise.all([
      member(t, systemClock, a.partnerId, "viewer"),
      member(t, systemClock, b.partnerId, "viewer"),
    ]);
    expect(await notFound(viewerA.browser.client(WebhookService).getDelivery({ id: deliveryB }))).toBe(
      "not_found",
    );
    viewerB.browser.environment = "production";
    expect(await notFound(viewerB.browser.client(WebhookService).getDelivery({ id: deliveryB }))).toBe(
      "not_found",
    );
    viewerB.browser.environment = "sandbox";
    expect((await viewerB.browser.client(WebhookService).getDelivery({ id: deliveryB })).delivery?.id).toBe(
      deliveryB,
    );
    // Ids of the wrong shape are refused before any lookup.
    for (const id of ["whk_nope", `${deliveryB}x`, deliveryB.toLowerCase()]) {
      const res = await call("GET", `/partner/v1/deliveries/${id}`, b.sandboxKey);
      expect([res.status, res.body.code], id).toEqual([422, "validation_failed"]);
    }
  });
});

describe("since", () => {
  it("refuses a time before the 14 days, in the future, at the ends of the calendar, or none", async () => {
    const path = `/partner/v1/webhooks/${hookA}/replay-failed`;
    for (const since of [
      "0001-01-01T00:00:00Z",
      "9999-12-31T23:59:59Z",
      new Date(Date.now() + 3_600_000).toISOString(),
      new Date(Date.now() - 15 * 86_400_000).toISOString(),
    ]) {
      const res = await call("POST", path, a.sandboxKey, { since });
      expect(res.status, since).toBe(422);
      expect(res.body.details.fields).toHaveProperty("since");
    }
    for (const body of [{}, { since: null }]) {
      const res = await call("POST", path, a.sandboxKey, body);
      expect(res.status).toBe(422);
      expect(res.body.details.fields).toHaveProperty("since");
    }
    for (const since of ["yesterday", "10000-01-01T00:00:00Z", 12]) {
      const res = await call("POST", path, a.sandboxKey, { since });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
    }
  });
});

describe("limits", () => {
  it("takes 1 to 100 and at most four statuses, and refuses the rest", async () => {
    for (const base of [`/partner/v1/webhooks/${hookA}/deliveries`, "/partner/v1/events"]) {
      for (const limit of ["1", "100", "0"]) {
        expect((await call("GET", `${base}?limit=${limit}`, a.sandboxKey)).status, `${base} ${limit}`).toBe(
          200,
        );
      }
      for (const limit of ["101", "-1", "2147483648", "1e2"]) {
        const res = await call("GET", `${base}?limit=${limit}`, a.sandboxKey);
        expect(res.status, `${base} ${limit}`).toBeGreaterThanOrEqual(400);
        expect(res.status).toBeLessThan(500);
      }
    }
    const five = Array.from({ length: 5 }, () => "status=FAILED").join("&");
    const res = await call("GET", `/partner/v1/webhooks/${hookA}/deliveries?${five}`, a.sandboxKey);
    expect(res.status).toBe(422);
    const unset = await call(
      "GET",
      `/partner/v1/webhooks/${hookA}/deliveries?status=STATUS_UNSPECIFIED`,
      a.sandboxKey,
    );
    // The unset value filters nothing, as on every list.
    expect(unset.status).toBe(200);
  });
});

describe("thousands of failed deliveries on one subscription", () => {
  const MANY = 3_000;
  let p: PartnerFixture;
  let hook: string;

  beforeAll(async () => {
    p = await createPartner(t);
    hook = (await createWebhook(t.partnerUrl, p.sandboxKey, { url: receiver.url, events: ["*"] })).id;
    const raised = await raiseEvent(t.app, {
      partnerId: p.partnerId,
      environment: "sandbox",
      type: "consent.granted",
    });
    await eventually(async () => {
      const page = await call("GET", `/partner/v1/webhooks/${hook}/deliveries`, p.sandboxKey);
      return page.body.deliveries[0]?.status === "FAILED";
    });
    const ids = Array.from({ length: MANY }, () => newId("dlv"));
    const em = t.app.orm.em.fork();
    // Failed, with their next attempt days away (so the worker leaves them alone), each with one attempt.
    await sql(
      em,
      `insert into webhook_deliveries (id, event_id, webhook_id, partner_id, environment, status, attempts,
                                       next_attempt_at, created_at, last_status_code)
       select d, $2, $3, $4, 'sandbox', 'FAILED', 1, now() + interval '5 days', now() - interval '1 hour', 500
         from unnest($1::text[]) as d`,
      [ids, raised.eventId, hook, p.partnerId],
    );
    await sql(
      em,
      `insert into webhook_attempts (delivery_id, webhook_id, attempt, started_at, succeeded, status_code, latency_ms)
       select d, $2, 1, now() - (random() * interval '23 hours'), false, 500, (random() * 1000)::int
         from unnest($1::text[]) as d`,
      [ids, hook],
    );
  });

  it("keeps each read bounded", async () => {
    const timed = async (path: string) => {
      const started = performance.now();
      const res = await call("GET", path, p.sandboxKey);
      expect(res.status, path).toBe(200);
      expect(performance.now() - started, path).toBeLessThan(2_000);
      return res.body;
    };
    const page = await timed(`/partner/v1/webhooks/${hook}/deliveries?status=FAILED&limit=100`);
    expect(page.deliveries).toHaveLength(100);
    expect(page.hasMore).toBe(true);
    const delivered = await timed(`/partner/v1/webhooks/${hook}/deliveries?status=DELIVERED`);
    expect(delivered.deliveries).toEqual([]);
    const stats = await timed(`/partner/v1/webhooks/${hook}/stats`);
    const failed = stats.buckets.reduce((n: number, x: { failed?: number }) => n + (x.failed ?? 0), 0);
    expect(failed).toBe(stats.total.failed);
    expect(failed).toBeGreaterThanOrEqual(MANY);
    const attempts = await timed(`/partner/v1/deliveries/${page.deliveries[0].id}/attempts`);
    expect(attempts).toHaveLength(1);
  });

  it("replays at most a bucket's worth per call, all or nothing, and says more remain", async () => {
    const path = `/partner/v1/webhooks/${hook}/replay-failed`;
    const since = new Date(Date.now() - 2 * 3_600_000).toISOString();
    const replays = async () =>
      (
        await sql<{ n: number }>(
          t.app.orm.em.fork(),
          "select count(*)::int as n from webhook_deliveries where webhook_id = $1 and replay_of is not null",
          [hook],
        )
      )[0]?.n;
    const first = await call("POST", path, p.sandboxKey, { since });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ queued: CAPACITY, hasMore: true });
    expect(await replays()).toBe(CAPACITY);
    // The bucket is empty: the next call is refused whole, and queues nothing.
    const refused = await call("POST", path, p.sandboxKey, { since });
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe("webhook_sends_rate_limited");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // A token or two come back, not three: still refused whole rather than half done.
    await new Promise((r) => setTimeout(r, 2_100));
    const partial = await call("POST", path, p.sandboxKey, { since });
    expect(partial.status).toBe(429);
    expect(await replays()).toBe(CAPACITY);
    // Once the bucket can cover the batch, the next batch goes.
    const next = await eventually(
      async () => {
        await new Promise((r) => setTimeout(r, 250));
        const res = await call("POST", path, p.sandboxKey, { since });
        return res.status === 200 ? res : undefined;
      },
      { timeoutMs: 15_000 },
    );
    expect(next.body).toEqual({ queued: CAPACITY, hasMore: true });
    expect(await replays()).toBe(2 * CAPACITY);
  });
});
