import { Code, type ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { eventTypes } from "../../src/webhooks/event-types.ts";
import { createWebhook, raiseEvent } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, errorInfoOf, rest } from "../support/clients.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

let t: TestApp;
let a: PartnerFixture;
let b: PartnerFixture;
let receiver: TestReceiver;

beforeAll(async () => {
  // One production subscription on the loopback receiver: what each environment is delivered is the point.
  t = await startTestApp({ productionLocalWebhooks: true });
  [a, b] = await Promise.all([createPartner(t), createPartner(t)]);
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await t?.stop();
});

const post = (path: string, key: string, body: unknown, headers?: Record<string, string>) =>
  rest(t.partnerUrl, "POST", path, { key, body, headers });

describe("subscriptions", () => {
  it("creates, lists with stats, reads, updates and deletes a subscription", async () => {
    const created = await post("/partner/v1/webhooks", a.sandboxKey, {
      url: receiver.url,
      events: ["consent.*", "DISBURSEMENT_DELIVERED"],
      description: "loan ops",
    });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({
      id: expect.stringMatching(/^whk_/),
      url: receiver.url,
      events: ["consent.*", "DISBURSEMENT_DELIVERED"],
      description: "loan ops",
      status: "ACTIVE",
      secret: expect.stringMatching(/^whsec_/),
      stats: { delivered: 0, failed: 0, avgLatencyMs: 0, p50LatencyMs: 0, p95LatencyMs: 0 },
    });
    const id = created.body.id as string;

    const list = await rest(t.partnerUrl, "GET", "/partner/v1/webhooks", { key: a.sandboxKey });
    expect(Array.isArray(list.body)).toBe(true);
    const item = list.body.find((w: { id: string }) => w.id === id);
    expect(item).toMatchObject({ id, secret: "", stats: { delivered: 0 } });

    const got = await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${id}`, { key: a.sandboxKey });
    expect(got.body.secret).toBe("");

    const patched = await rest(t.partnerUrl, "PATCH", `/partner/v1/webhooks/${id}`, {
      key: a.sandboxKey,
      body: { addEvents: ["REPAYMENT_*"], removeEvents: ["DISBURSEMENT_DELIVERED"], description: "ops" },
    });
    expect(patched.body).toMatchObject({
      events: ["consent.*", "REPAYMENT_*"],
      description: "ops",
      url: receiver.url,
    });

    const emptied = await rest(t.partnerUrl, "PATCH", `/partner/v1/webhooks/${id}`, {
      key: a.sandboxKey,
      body: { removeEvents: ["consent.*", "REPAYMENT_*"] },
    });
    expect(emptied.status).toBe(422);
    expect(emptied.body.details.fields).toHaveProperty("removeEvents");

    const deleted = await rest(t.partnerUrl, "DELETE", `/partner/v1/webhooks/${id}`, { key: a.sandboxKey });
    expect(deleted.body).toMatchObject({ id, deleted: true });
    expect(
      (await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${id}`, { key: a.sandboxKey })).status,
    ).toBe(404);
  });

  it("counts the last 24 hours of attempts in the stats", async () => {
    const hook = await createWebhook(t.partnerUrl, a.sandboxKey, { url: receiver.url, events: ["*"] });
    const sent = await post(`/partner/v1/webhooks/${hook.id}/test`, a.sandboxKey, {});
    await eventually(async () => {
      const d = await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${hook.id}/deliveries`, {
        key: a.sandboxKey,
      });
      return d.body.deliveries[0]?.status === "DELIVERED";
    });
    const got = await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${hook.id}`, { key: a.sandboxKey });
    expect(got.body.stats).toMatchObject({ delivered: 1, failed: 0 });
    expect(got.body.stats.p95LatencyMs).toBeGreaterThanOrEqual(got.body.stats.p50LatencyMs);
    expect(sent.body.test).toBe(true);
  });

  it("rejects unknown event types and malformed filters with invalid_event_type", async () => {
    for (const events of [
      ["consent.created"],
      ["consent*"],
      ["nope.*"],
      ["**"],
      ["REPAYMENT_COLLECTED", "repayment_collected"],
    ]) {
      const res = await post("/partner/v1/webhooks", a.sandboxKey, { url: receiver.url, events });
      expect(res.status, JSON.stringify(events)).toBe(400);
      expect(res.body.code).toBe("invalid_event_type");
    }
    const none = await post("/partner/v1/webhooks", a.sandboxKey, { url: receiver.url, events: [] });
    expect(none.status).toBe(422);
    const bad = await post("/partner/v1/webhooks", a.sandboxKey, {
      url: receiver.url,
      events: ["*"],
      extra: 1,
    });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe("invalid_request");
  });

  it("pages through deliveries newest first", async () => {
    const hook = await createWebhook(t.partnerUrl, a.sandboxKey, { url: receiver.url, events: ["*"] });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push((await post(`/partner/v1/webhooks/${hook.id}/test`, a.sandboxKey, {})).body.id);
    const first = await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${hook.id}/deliveries?limit=2`, {
      key: a.sandboxKey,
    });
    expect(first.body.deliveries.map((d: { id: string }) => d.id)).toEqual([ids[4], ids[3]]);
    expect(first.body.hasMore).toBe(true);
    const rest2 = await rest(
      t.partnerUrl,
      "GET",
      `/partner/v1/webhooks/${hook.id}/deliveries?limit=10&starting_after=${ids[3]}`,
      {
        key: a.sandboxKey,
      },
    );
    expect(rest2.body.deliveries.map((d: { id: string }) => d.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect(rest2.body.hasMore).toBe(false);
    const tooMany = await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${hook.id}/deliveries?limit=101`, {
      key: a.sandboxKey,
    });
    expect(tooMany.status).toBe(422);
  });
});

describe("routing and tenancy", () => {
  it("routes events by exact and wildcard filters, only within the partner and environment", async () => {
    const p = await createPartner(t);
    const hooks = {
      consent: await createWebhook(t.partnerUrl, p.sandboxKey, { url: receiver.url, events: ["consent.*"] }),
      repayments: await createWebhook(t.partnerUrl, p.sandboxKey, {
        url: receiver.url,
        events: ["REPAYMENT_*"],
      }),
      all: await createWebhook(t.partnerUrl, p.sandboxKey, { url: receiver.url, events: ["*"] }),
      tier: await createWebhook(t.partnerUrl, p.sandboxKey, {
        url: receiver.url,
        events: ["standing.tier_changed"],
      }),
      live: await createWebhook(t.partnerUrl, p.liveKey, { url: receiver.url, events: ["*"] }),
      otherPartner: await createWebhook(t.partnerUrl, b.sandboxKey, { url: receiver.url, events: ["*"] }),
    };
    const raised = new Map<string, string>();
    for (const type of eventTypes) {
      const r = await raiseEvent(t.app, { partnerId: p.partnerId, environment: "sandbox", type });
      raised.set(type, r.eventId as string);
    }
    const routed = await sql<{ webhook_id: string; type: string }>(
      t.app.orm.em.fork(),
      "select d.webhook_id, e.type from webhook_deliveries d join events e on e.id = d.event_id where e.id = any($1::text[])",
      [[...raised.values()]],
    );
    const to = (hook: { id: string }) =>
      routed
        .filter((r) => r.webhook_id === hook.id)
        .map((r) => r.type)
        .sort();
    expect(to(hooks.consent)).toEqual(["consent.granted", "consent.revoked"]);
    expect(to(hooks.repayments)).toEqual(["REPAYMENT_COLLECTED", "REPAYMENT_FAILED"]);
    expect(to(hooks.all)).toEqual([...eventTypes].sort());
    expect(to(hooks.tier)).toEqual(["standing.tier_changed"]);
    expect(to(hooks.live)).toEqual([]);
    expect(to(hooks.otherPartner)).toEqual([]);

    // Delivered: the receiver sees each event id with the matching deliveries only.
    const granted = raised.get("consent.granted") as string;
    await eventually(
      () => receiver.received.filter((r) => r.headers["x-service-event-id"] === granted).length === 2,
    );

    // Lookup: the owner sees the event and its deliveries; another partner, or the other environment, gets 404.
    const own = await rest(t.partnerUrl, "GET", `/partner/v1/events/${granted}`, { key: p.sandboxKey });
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ id: granted, type: "consent.granted" });
    expect(own.body.payload).toMatchObject({
      id: granted,
      type: "consent.granted",
      payload: { note: "raised by a test" },
    });
    expect(own.body.deliveries.map((d: { webhookId: string }) => d.webhookId).sort()).toEqual(
      [hooks.all.id, hooks.consent.id].sort(),
    );
    for (const key of [b.sandboxKey, p.liveKey]) {
      const other = await rest(t.partnerUrl, "GET", `/partner/v1/events/${granted}`, { key });
      expect(other.status).toBe(404);
      expect(other.body.code).toBe("not_found");
    }
    // Nor can another tenant read, change, test or replay what is not theirs.
    const theirs = hooks.consent.id;
    expect(
      (await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${theirs}`, { key: b.sandboxKey })).status,
    ).toBe(404);
    expect(
      (await rest(t.partnerUrl, "DELETE", `/partner/v1/webhooks/${theirs}`, { key: p.liveKey })).status,
    ).toBe(404);
    expect((await post(`/partner/v1/webhooks/${theirs}/test`, b.sandboxKey, {})).status).toBe(404);
    const dlv = own.body.deliveries[0].id as string;
    expect((await post(`/partner/v1/deliveries/${dlv}/replay`, b.sandboxKey, {})).status).toBe(404);
    expect(
      (await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${theirs}/deliveries`, { key: b.sandboxKey }))
        .status,
    ).toBe(404);
  });

  it("replays a delivery as a new delivery of the same event body", async () => {
    const hook = await createWebhook(t.partnerUrl, a.sandboxKey, { url: receiver.url, events: ["*"] });
    const sent = await post(`/partner/v1/webhooks/${hook.id}/test`, a.sandboxKey, {
      eventType: "REPAYMENT_FAILED",
    });
    const first = await eventually(() =>
      receiver.received.find((r) => r.headers["x-service-delivery-id"] === sent.body.id),
    );
    const replay = await post(`/partner/v1/deliveries/${sent.body.id}/replay`, a.sandboxKey, {});
    expect(replay.body).toMatchObject({
      eventId: sent.body.eventId,
      replayOf: sent.body.id,
      status: "PENDING",
    });
    const second = await eventually(() =>
      receiver.received.find((r) => r.headers["x-service-delivery-id"] === replay.body.id),
    );
    expect(second.body).toBe(first.body);
    expect(second.headers["x-service-event-id"]).toBe(sent.body.eventId);
  });
});

describe("idempotency keys", () => {
  const body = () => ({ url: receiver.url, events: ["consent.granted"], description: "idempotent" });

  it("creates one subscription for 20 concurrent identical POSTs, and replays the first response", async () => {
    const p = await createPartner(t);
    const key = "create-webhook-0001";
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        post("/partner/v1/webhooks", p.sandboxKey, body(), { "idempotency-key": key }),
      ),
    );
    const ok = results.filter((r) => r.status === 200);
    const busy = results.filter((r) => r.status === 409);
    expect(ok.length + busy.length).toBe(20);
    expect(new Set(ok.map((r) => r.body.id)).size).toBe(1);
    for (const r of busy) expect(r.body.code).toBe("idempotency_key_in_use");
    const [row] = await sql<{ count: number }>(
      t.app.orm.em.fork(),
      "select count(*)::int as count from webhooks where partner_id = $1",
      [p.partnerId],
    );
    expect(row?.count).toBe(1);

    const again = await post("/partner/v1/webhooks", p.sandboxKey, body(), { "idempotency-key": key });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(ok[0]?.body);

    // The same key over Connect replays the same response: the key belongs to the partner, not the face.
    const viaConnect = await connectClient(
      WebhookService,
      t.partnerUrl,
      `Bearer ${p.sandboxKey}`,
    ).createWebhook(body(), {
      headers: { "idempotency-key": key },
    });
    expect(viaConnect.webhook?.id).toBe(ok[0]?.body.id);

    const other = await post(
      "/partner/v1/webhooks",
      p.sandboxKey,
      { ...body(), description: "different" },
      { "idempotency-key": key },
    );
    expect(other.status).toBe(422);
    expect(other.body.code).toBe("idempotency_key_reused");

    // Keys are per environment: the same key under the live key is a new request.
    const live = await post("/partner/v1/webhooks", p.liveKey, body(), { "idempotency-key": key });
    expect(live.status).toBe(200);
    expect(live.body.id).not.toBe(ok[0]?.body.id);
  });

  it("answers 409 while a request with the same key is still running", async () => {
    const p = await createPartner(t);
    const key = "still-running";
    const db = new pg.Client({ connectionString: t.databaseUrl });
    await db.connect();
    try {
      await db.query("select pg_advisory_lock(hashtextextended($1, 0))", [
        `idempotency:${p.partnerId}:sandbox:${key}`,
      ]);
      const busy = await post("/partner/v1/webhooks", p.sandboxKey, body(), { "idempotency-key": key });
      expect(busy.status).toBe(409);
      expect(busy.body.code).toBe("idempotency_key_in_use");
      await expect(
        connectClient(WebhookService, t.partnerUrl, `Bearer ${p.sandboxKey}`).createWebhook(body(), {
          headers: { "idempotency-key": key },
        }),
      ).rejects.toSatisfy(
        (err: ConnectError) =>
          err.code === Code.Aborted && errorInfoOf(err)?.reason === "idempotency_key_in_use",
      );
    } finally {
      await db.end();
    }
    const after = await post("/partner/v1/webhooks", p.sandboxKey, body(), { "idempotency-key": key });
    expect(after.status).toBe(200);
  });

  it("keeps nothing when the guarded write fails, so a retry proceeds", async () => {
    const p = await createPartner(t);
    const key = "fails-then-works";
    const bad = await post(
      "/partner/v1/webhooks",
      p.sandboxKey,
      { ...body(), events: ["nope"] },
      { "idempotency-key": key },
    );
    expect(bad.status).toBe(400);
    const good = await post(
      "/partner/v1/webhooks",
      p.sandboxKey,
      { ...body(), events: ["nope"] },
      { "idempotency-key": key },
    );
    expect(good.status).toBe(400);
    expect(good.headers.get("idempotent-replayed")).toBeNull();
  });

  it("stores replayable responses sealed, so a new webhook's secret is not readable at rest", async () => {
    const p = await createPartner(t);
    const res = await post("/partner/v1/webhooks", p.sandboxKey, body(), { "idempotency-key": "sealed-1" });
    const rows = await sql<{ response: Buffer }>(
      t.app.orm.em.fork(),
      "select response from idempotency_keys where partner_id = $1",
      [p.partnerId],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]?.response.includes(Buffer.from(res.body.secret))).toBe(false);
  });

  it("rejects a malformed key", async () => {
    const res = await post("/partner/v1/webhooks", a.sandboxKey, body(), {
      "idempotency-key": "x".repeat(256),
    });
    expect(res.status).toBe(400);
  });
});
