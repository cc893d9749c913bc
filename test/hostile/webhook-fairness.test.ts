import { afterEach, describe, expect, it } from "vitest";
import { type Config, loadConfig } from "../../src/config.ts";
import { sql } from "../../src/platform/db/sql.ts";
import type { Environment } from "../../src/platform/tenancy.ts";
import { createWebhook, raiseEvent } from "../factories/events.ts";
import { createPartner } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

// A hostile (or merely broken) partner's endpoint must not cost another partner anything (ARCHITECTURE.md
// "Jobs and the outbox"): an endpoint that answers after 25 s, a sandbox flood, an endpoint that fails every
// time (test sends and replays in a loop: webhook-send-limits.test.ts). Real PostgreSQL, pg-boss and HTTP over
// loopback.

const SLOW_MS = 25_000;
const webhooks = (over: Partial<Config["webhooks"]> = {}): Partial<Config> => ({
  webhooks: { ...loadConfig({}).webhooks, sweepIntervalMs: 3_600_000, ...over },
});

const receivers: TestReceiver[] = [];
const apps: TestApp[] = [];
const receiver = async (answer?: TestReceiver["answer"]) => {
  const r = await startReceiver(answer);
  receivers.push(r);
  return r;
};
// Production subscriptions on the loopback receivers: the environments' own lanes and buckets are the point.
const app = async (config: Partial<Config>) => {
  const t = await startTestApp({ config, productionLocalWebhooks: true });
  apps.push(t);
  return t;
};
// Receivers first: attempts still waiting on a slow endpoint end at once, so the apps stop promptly.
afterEach(async () => {
  for (const r of receivers.splice(0)) await r.close();
  for (const t of apps.splice(0)) await t.stop();
});

/**
 * Raises `count` events for a partner, `parallel` transactions at a time, as features would: no more at once than
 * the test app's pool of 5 holds beside its workers (20 at a time waited past the pool's 3 s acquire time-out on a
 * loaded machine, failing the flood rather than the property under test).
 */
async function flood(t: TestApp, partnerId: string, environment: Environment, count: number, parallel = 4) {
  for (let i = 0; i < count; i += parallel) {
    await Promise.all(
      Array.from({ length: Math.min(parallel, count - i) }, () =>
        raiseEvent(t.app, { partnerId, environment, type: "consent.granted" }),
      ),
    );
  }
}

/**
 * Raises `count` events one after another, `everyMs` apart, and answers how long each took from the commit of
 * its transaction to its arrival at `at`.
 */
async function latencies(
  t: TestApp,
  partnerId: string,
  environment: Environment,
  at: TestReceiver,
  count: number,
  everyMs = 100,
): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const raised = await raiseEvent(t.app, { partnerId, environment, type: "consent.granted" });
    const committed = Date.now();
    const arrival = await eventually(
      () => at.received.find((r) => r.headers["x-service-event-id"] === raised.eventId),
      { timeoutMs: 20_000, what: `event ${raised.eventId} delivered` },
    );
    out.push(arrival.at - committed);
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return out;
}

const attemptsTo = (t: TestApp, webhookId: string) =>
  sql<{ started_at: Date; succeeded: boolean }>(
    t.app.orm.em.fork(),
    "select started_at, succeeded from webhook_attempts where webhook_id = $1 order by started_at",
    [webhookId],
  );

describe("an endpoint that answers after 25 seconds", () => {
  it("holds at most its own slots: another partner's deliveries still arrive within 2 s while 200 wait for it", async () => {
    const t = await app(webhooks());
    const slow = await receiver(() => ({ status: 200, delayMs: SLOW_MS }));
    const fast = await receiver();
    const a = await createPartner(t);
    const b = await createPartner(t);
    await createWebhook(t.partnerUrl, a.sandboxKey, { url: slow.url, events: ["*"] });
    await createWebhook(t.partnerUrl, b.sandboxKey, { url: fast.url, events: ["*"] });

    await flood(t, a.partnerId, "sandbox", 200);
    // The slow endpoint is saturated: every slot it may have is taken, each for 25 s.
    const perDestination = loadConfig({}).webhooks.maxInFlightPerDestination;
    await slow.waitFor(perDestination, 10_000);

    const waits = await latencies(t, b.partnerId, "sandbox", fast, 20);
    expect(Math.max(...waits), `partner B waited ${waits.join(", ")} ms`).toBeLessThan(2_000);
    // Partner A's endpoint got no more than its slots, and none was freed in time for another attempt.
    expect(slow.peakOpen).toBeLessThanOrEqual(perDestination);
    expect(slow.received.length).toBe(perDestination);
    // Partner A's deliveries are all still to be made: none lost, none given up.
    const [pending] = await sql<{ n: number }>(
      t.app.orm.em.fork(),
      "select count(*)::int as n from webhook_deliveries where partner_id = $1 and status in ('PENDING', 'FAILED')",
      [a.partnerId],
    );
    expect(pending?.n).toBe(200);
  }, 60_000);
});

describe("a sandbox flood", () => {
  it("does not delay production: the environments have their own queues and their own capacity", async () => {
    // Small limits, so that two sandbox partners fill the sandbox's whole capacity with slow attempts.
    const limits = { maxInFlight: 8, maxInFlightPerPartner: 4, maxInFlightPerDestination: 2 };
    const t = await app(webhooks(limits));
    const slow = await receiver(() => ({ status: 200, delayMs: SLOW_MS }));
    const fast = await receiver();
    const a = await createPartner(t);
    const b = await createPartner(t);
    for (const p of [a, b]) {
      for (let i = 0; i < 2; i++)
        await createWebhook(t.partnerUrl, p.sandboxKey, { url: slow.url, events: ["*"] });
    }
    // Partner A's own production subscription: the same partner, the other environment.
    await createWebhook(t.partnerUrl, a.liveKey, { url: fast.url, events: ["*"] });

    await Promise.all([flood(t, a.partnerId, "sandbox", 500), flood(t, b.partnerId, "sandbox", 500)]);
    await slow.waitFor(limits.maxInFlight, 10_000);
    expect(t.app.services.deliveryWorker.load().sandbox.inFlight).toBe(limits.maxInFlight);

    const waits = await latencies(t, a.partnerId, "production", fast, 20);
    expect(Math.max(...waits), `production waited ${waits.join(", ")} ms`).toBeLessThan(2_000);
    expect(slow.peakOpen).toBeLessThanOrEqual(limits.maxInFlight);
  }, 60_000);
});

describe("an endpoint that fails every time", () => {
  it("is backed off: after 5 failures its deliveries wait and one probe at a time goes, others unaffected; all arrive once it recovers", async () => {
    const t = await app(webhooks());
    const { circuitFailures, maxInFlightPerDestination } = loadConfig({}).webhooks;
    let failing = true;
    const flaky = await receiver(() => (failing ? { status: 500, body: "down" } : { status: 200 }));
    const healthy = await receiver();
    const a = await createPartner(t);
    const b = await createPartner(t);
    const broken = await createWebhook(t.partnerUrl, a.sandboxKey, { url: flaky.url, events: ["*"] });
    const fine = await createWebhook(t.partnerUrl, a.sandboxKey, { url: healthy.url, events: ["*"] });
    await createWebhook(t.partnerUrl, b.sandboxKey, { url: healthy.url, events: ["*"] });

    // 40 events, each to both of partner A's subscriptions.
    const started = Date.now();
    await flood(t, a.partnerId, "sandbox", 40);
    // The healthy subscription of the same partner, and another partner, are served at once throughout.
    const waits = await latencies(t, b.partnerId, "sandbox", healthy, 12, 500);
    expect(Math.max(...waits), `waits ${waits.join(", ")} ms`).toBeLessThan(2_000);
    await eventually(
      async () => {
        const [row] = await sql<{ n: number }>(
          t.app.orm.em.fork(),
          "select count(*)::int as n from webhook_deliveries where webhook_id = $1 and status = 'DELIVERED'",
          [fine.id],
        );
        return row?.n === 40;
      },
      { what: "the healthy subscription's 40 deliveries" },
    );

    // Without the circuit, 40 first attempts and as many retries after 5 s would have come by now. With it,
    // only the attempts under way when the fifth failure came back, then one probe every few seconds.
    const during = Date.now() - started;
    const tried = (await attemptsTo(t, broken.id)).length;
    expect(during).toBeGreaterThan(5_500);
    expect(tried).toBeGreaterThanOrEqual(circuitFailures);
    expect(tried).toBeLessThanOrEqual(maxInFlightPerDestination + circuitFailures + 3);
    const [circuit] = await sql<{ failure_streak: number; circuit_open_until: string | null }>(
      t.app.orm.em.fork(),
      "select failure_streak, circuit_open_until::text from webhooks where id = $1",
      [broken.id],
    );
    expect(circuit?.failure_streak).toBeGreaterThanOrEqual(circuitFailures);
    expect(circuit?.circuit_open_until).not.toBeNull();
    // The partner sees it too: the subscription says until when its deliveries wait.
    const open = await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${broken.id}`, { key: a.sandboxKey });
    expect(open.body.circuitOpenUntil).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    // Its deliveries wait in the database for a later time, none given up.
    const [waiting] = await sql<{ n: number; later: number }>(
      t.app.orm.em.fork(),
      `select count(*)::int as n, count(*) filter (where next_attempt_at > now())::int as later
         from webhook_deliveries where webhook_id = $1 and status in ('PENDING', 'FAILED')`,
      [broken.id],
    );
    expect(waiting?.n).toBe(40);
    expect(waiting?.later).toBeGreaterThanOrEqual(39);

    // The endpoint recovers: the next probe succeeds, the circuit closes, and every delivery arrives.
    failing = false;
    await eventually(
      async () => {
        const [row] = await sql<{ n: number }>(
          t.app.orm.em.fork(),
          "select count(*)::int as n from webhook_deliveries where webhook_id = $1 and status = 'DELIVERED'",
          [broken.id],
        );
        return row?.n === 40;
      },
      { timeoutMs: 40_000, what: "the recovered subscription's 40 deliveries" },
    );
    expect(new Set(flaky.received.map((r) => r.headers["x-service-event-id"])).size).toBe(40);
    const closed = await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${broken.id}`, {
      key: a.sandboxKey,
    });
    expect(closed.body.circuitOpenUntil).toBeUndefined();
    const after = await attemptsTo(t, broken.id);
    // Each delivered once; the failures stayed few: the first ones, then single probes.
    expect(after.filter((x) => x.succeeded).length).toBe(40);
    expect(after.filter((x) => !x.succeeded).length).toBeLessThanOrEqual(
      maxInFlightPerDestination + circuitFailures + 5,
    );
  }, 90_000);
});
