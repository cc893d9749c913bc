import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { loadConfig } from "../../src/config.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, errorInfoOf, rest } from "../support/clients.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";

// Test sends and replays in a loop must not cost another partner anything (ARCHITECTURE.md "Jobs and the
// outbox"): they have a bucket of their own per partner and environment. The bucket lives in PostgreSQL and
// refills on its clock, half a token a second here: four sends must reach it within two seconds for the fourth
// to be refused, so this file runs with the few that have the machine to themselves (vitest.config.ts).

const webhooks = (over: Partial<ReturnType<typeof loadConfig>["webhooks"]> = {}) => ({
  webhooks: { ...loadConfig({}).webhooks, sweepIntervalMs: 3_600_000, ...over },
});

describe("test sends and replays", () => {
  let t: TestApp;
  let a: PartnerFixture;
  let b: PartnerFixture;
  let sink: TestReceiver;
  beforeAll(async () => {
    t = await startTestApp({
      config: webhooks({ sendRateLimit: { capacity: 3, refillPerSecond: 0.5 } }),
      productionLocalWebhooks: true,
    });
    sink = await startReceiver();
    a = await createPartner(t);
    b = await createPartner(t);
  });
  afterAll(async () => {
    await sink?.close();
    await t?.stop();
  });

  it("have their own limit per partner and environment: 429 webhook_sends_rate_limited with Retry-After", async () => {
    const hook = await createWebhook(t.partnerUrl, a.sandboxKey, { url: sink.url, events: ["*"] });
    const send = (key: string, id: string, headers: Record<string, string> = {}) =>
      rest(t.partnerUrl, "POST", `/partner/v1/webhooks/${id}/test`, { key, body: {}, headers });
    const sent: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await send(a.sandboxKey, hook.id);
      expect(res.status).toBe(200);
      sent.push(res.body.id);
    }
    const refused = await send(a.sandboxKey, hook.id);
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe("webhook_sends_rate_limited");
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(2);
    // A replay draws on the same bucket; a refused one creates no delivery.
    const replay = await rest(t.partnerUrl, "POST", `/partner/v1/deliveries/${sent[0]}/replay`, {
      key: a.sandboxKey,
      body: {},
      headers: { "idempotency-key": "replay-1" },
    });
    expect(replay.status).toBe(429);
    expect(replay.body.code).toBe("webhook_sends_rate_limited");
    const [count] = await sql<{ n: number }>(
      t.app.orm.em.fork(),
      "select count(*)::int as n from webhook_deliveries where webhook_id = $1",
      [hook.id],
    );
    expect(count?.n).toBe(3);
    // The same over Connect: resource_exhausted, the code in google.rpc.ErrorInfo, retry-after metadata.
    const err = await connectClient(WebhookService, t.partnerUrl, `Bearer ${a.sandboxKey}`)
      .sendTestEvent({ id: hook.id })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.ResourceExhausted);
    expect(errorInfoOf(err)?.reason).toBe("webhook_sends_rate_limited");
    expect(Number((err as ConnectError).metadata.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // Another partner, and the same partner's production key, have their own buckets.
    const other = await createWebhook(t.partnerUrl, b.sandboxKey, { url: sink.url, events: ["*"] });
    expect((await send(b.sandboxKey, other.id)).status).toBe(200);
    const live = await createWebhook(t.partnerUrl, a.liveKey, { url: sink.url, events: ["*"] });
    expect((await send(a.liveKey, live.id)).status).toBe(200);
    // Ordinary writes of the partner are not limited by it.
    const patched = await rest(t.partnerUrl, "PATCH", `/partner/v1/webhooks/${hook.id}`, {
      key: a.sandboxKey,
      body: { description: "still writable" },
    });
    expect(patched.status).toBe(200);
    // After Retry-After, a send goes through again.
    await new Promise((r) => setTimeout(r, retryAfter * 1_000));
    expect((await send(a.sandboxKey, hook.id)).status).toBe(200);
    await sink.waitFor(6);
  });
});
