import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Webhook_Status } from "../../gen/partner/v1/webhooks_pb.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartnerClient, createPartnerConnectClients, PartnerApiError } from "../../src/sdk/index.ts";
import { createPartner } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

let t: TestApp;

beforeAll(async () => {
  // One write a second: the second write in a burst meets a 429 with Retry-After.
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 1000, refillPerSecond: 1000 },
        write: { capacity: 1, refillPerSecond: 1 },
      },
    },
  });
});
afterAll(() => t?.stop());

/** A proxy in front of the service that forwards everything, but answers the first POST with a 502 after the service did it. */
async function lossyProxy(target: string) {
  const seen: { method: string; idempotencyKey: string | undefined; status: number }[] = [];
  let dropped = false;
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (typeof v === "string" && k !== "host") headers[k] = v;
    const upstream = await fetch(`${target}${req.url}`, {
      method: req.method,
      headers,
      body: chunks.length ? Buffer.concat(chunks) : undefined,
    });
    const text = await upstream.text();
    const drop = req.method === "POST" && !dropped && upstream.status === 200;
    if (drop) dropped = true;
    seen.push({
      method: req.method ?? "",
      idempotencyKey: headers["idempotency-key"],
      status: upstream.status,
    });
    res.writeHead(drop ? 502 : upstream.status, {
      "content-type": "application/json",
      ...(upstream.headers.get("retry-after")
        ? { "retry-after": upstream.headers.get("retry-after") ?? "" }
        : {}),
      ...(upstream.headers.get("idempotent-replayed") ? { "idempotent-replayed": "true" } : {}),
    });
    res.end(drop ? JSON.stringify({ code: "bad_gateway", message: "upstream connection lost" }) : text);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe("the SDK's REST client", () => {
  it("returns typed messages: int64 as bigint, enums as their values", async () => {
    const p = await createPartner(t); // its own keys, so its own rate-limit buckets
    const api = createPartnerClient({ baseUrl: t.partnerUrl, apiKey: p.sandboxKey });
    const created = await api.webhooks.createWebhook({ url: "http://127.0.0.1:9/a", events: ["consent.*"] });
    expect(created.webhook?.id).toMatch(/^whk_/);
    expect(created.webhook?.status).toBe(Webhook_Status.ACTIVE);
    const keys = await api.keys.listKeys({});
    expect(keys.keys.length).toBeGreaterThan(0);
    await expect(api.webhooks.getWebhook({ id: "whk_01J00000000000000000000000" })).rejects.toMatchObject({
      status: 404,
      code: "not_found",
      requestId: expect.stringMatching(/^req_/),
    });
  });

  it("a write whose answer is lost (502) is sent again with the same key and happens once", async () => {
    const p = await createPartner(t); // its own keys, so its own rate-limit buckets
    const proxy = await lossyProxy(t.partnerUrl);
    try {
      const waits: number[] = [];
      const api = createPartnerClient({
        baseUrl: proxy.url,
        apiKey: p.sandboxKey,
        sleep: (ms) => {
          waits.push(ms);
          return new Promise((r) => setTimeout(r, ms));
        },
      });
      const before = await sql(t.app.orm.em.fork(), "select 1 from webhooks where partner_id = $1", [
        p.partnerId,
      ]);
      const created = await api.webhooks.createWebhook({ url: "http://127.0.0.1:9/b", events: ["*"] });
      const posts = proxy.seen.filter((s) => s.method === "POST");
      // The first was done and its answer lost; later ones may meet the write limit; the last is the replay.
      expect(posts[0]?.status).toBe(200);
      expect(posts.at(-1)?.status).toBe(200);
      expect(posts[0]?.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
      expect(new Set(posts.map((s) => s.idempotencyKey)).size).toBe(1);
      expect(waits.length).toBe(posts.length - 1);
      const after = await sql(t.app.orm.em.fork(), "select id from webhooks where partner_id = $1", [
        p.partnerId,
      ]);
      expect(after.length).toBe(before.length + 1);
      expect(created.webhook?.secret).toMatch(/^whsec_/);
    } finally {
      await proxy.close();
    }
  });

  it("waits out a 429 for as long as Retry-After says, then succeeds", async () => {
    const p = await createPartner(t); // its own keys, so its own rate-limit buckets
    const waits: number[] = [];
    const api = createPartnerClient({
      baseUrl: t.partnerUrl,
      apiKey: p.sandboxKey,
      sleep: (ms) => {
        waits.push(ms);
        return new Promise((r) => setTimeout(r, ms));
      },
    });
    const results = [];
    for (let i = 0; i < 3; i++)
      results.push(await api.webhooks.createWebhook({ url: `http://127.0.0.1:9/c${i}`, events: ["*"] }));
    expect(results.every((r) => r.webhook?.id.startsWith("whk_"))).toBe(true);
    expect(waits.length).toBeGreaterThan(0);
    expect(waits.every((w) => w >= 1000)).toBe(true);
  });

  it("gives up after maxRetries with the API's error", async () => {
    const p = await createPartner(t); // its own keys, so its own rate-limit buckets
    const api = createPartnerClient({ baseUrl: t.partnerUrl, apiKey: p.sandboxKey, maxRetries: 0 });
    await api.webhooks.createWebhook({ url: "http://127.0.0.1:9/d", events: ["*"] }).catch(() => undefined);
    const err = await api.webhooks
      .createWebhook({ url: "http://127.0.0.1:9/e", events: ["*"] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(PartnerApiError);
    expect(err).toMatchObject({ status: 429, code: "rate_limited", retryAfterSeconds: expect.any(Number) });
  });

  it("also serves the generated Connect clients, with the key sent", async () => {
    const p = await createPartner(t); // its own keys, so its own rate-limit buckets
    const connect = createPartnerConnectClients({ baseUrl: t.partnerUrl, apiKey: p.sandboxKey });
    const keys = await connect.keys.listKeys({});
    expect(keys.keys.every((k) => k.environment === "sandbox")).toBe(true);
  });
});
