import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { BOSS_SCHEMA } from "../../src/platform/jobs/boss.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

const clock = new ManualClock("2027-05-01T00:00:00Z");
let t: TestApp;
let p: PartnerFixture;

beforeAll(async () => {
  // An API-only instance: nothing consumes the queue, so the jobs the outbox writes stay visible.
  t = await startTestApp({ clock, config: { role: "api" } });
  p = await createPartner(t);
  await createWebhook(t.partnerUrl, p.sandboxKey, { url: "http://127.0.0.1:9/hooks", events: ["*"] });
});
afterAll(() => t?.stop());

const count = async (table: string, where: string, params: unknown[]) => {
  const [row] = await sql<{ n: number }>(
    t.app.orm.em.fork(),
    `select count(*)::int as n from ${table} where ${where}`,
    params,
  );
  return row?.n ?? 0;
};
// Sandbox deliveries are woken from their own queue.
const jobs = () => count(`${BOSS_SCHEMA}.job`, "name = 'webhooks.deliver-sandbox'", []);

describe("the transactional outbox", () => {
  it("commits the event, its deliveries and their wake-ups with the caller's change", async () => {
    const before = await jobs();
    const raised = await t.app.orm.em.fork().transactional((tx) =>
      t.app.services.outbox.raise(tx, {
        partnerId: p.partnerId,
        environment: "sandbox",
        type: "consent.revoked",
        payload: { x: 1 },
      }),
    );
    expect(await count("events", "id = $1", [raised.eventId])).toBe(1);
    expect(await count("webhook_deliveries", "event_id = $1", [raised.eventId])).toBe(1);
    expect(await jobs()).toBe(before + 1);
  });

  it("leaves nothing behind when the caller's transaction rolls back", async () => {
    const before = await jobs();
    let eventId: string | undefined;
    await expect(
      t.app.orm.em.fork().transactional(async (tx) => {
        eventId = (
          await t.app.services.outbox.raise(tx, {
            partnerId: p.partnerId,
            environment: "sandbox",
            type: "consent.granted",
            payload: {},
          })
        ).eventId;
        throw new Error("the change failed");
      }),
    ).rejects.toThrow("the change failed");
    expect(eventId).toMatch(/^evt_/);
    expect(await count("events", "id = $1", [eventId])).toBe(0);
    expect(await count("webhook_deliveries", "event_id = $1", [eventId])).toBe(0);
    expect(await jobs()).toBe(before);
  });

  it("refuses to raise outside a transaction", async () => {
    await expect(
      t.app.services.outbox.raise(t.app.orm.em.fork(), {
        partnerId: p.partnerId,
        environment: "sandbox",
        type: "consent.granted",
        payload: {},
      }),
    ).rejects.toThrow(/transaction/);
  });
});

describe("idempotency records", () => {
  it("are kept 7 days, then purged and the key is free again", async () => {
    const body = { url: "http://127.0.0.1:9/hooks", events: ["*"] };
    const first = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: p.sandboxKey,
      body,
      headers: { "idempotency-key": "week" },
    });
    clock.advance(7 * ms.day - 1);
    const replay = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: p.sandboxKey,
      body,
      headers: { "idempotency-key": "week" },
    });
    expect(replay.body.id).toBe(first.body.id);
    clock.advance(2);
    expect(await t.app.services.idempotency.purgeExpired(t.app.orm.em.fork())).toBeGreaterThanOrEqual(1);
    const fresh = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: p.sandboxKey,
      body,
      headers: { "idempotency-key": "week" },
    });
    expect(fresh.status).toBe(200);
    expect(fresh.body.id).not.toBe(first.body.id);
  });
});
