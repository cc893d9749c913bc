import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { retrySchedule } from "../../src/webhooks/schedule.ts";
import { createWebhook, raiseEvent } from "../factories/events.ts";
import { createPartner } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

// Retries on time (CONTRACT.md §5: after about 5 s, 30 s, …): every scheduled attempt starts within a second
// of the `nextAttemptAt` the delivery showed. pg-boss gives a delayed job no NOTIFY, so a design that relies
// on it alone retries at the queue's next poll; the sweeper (here once an hour) must not be what saves it.
// Two worker instances share the database, and the first one stops once the first attempts are made: the
// retries it had scheduled are made on time by the other.

const config = {
  webhooks: {
    ...loadConfig({}).webhooks,
    sweepIntervalMs: 3_600_000,
    // Many deliveries to one failing endpoint: no circuit here, only the schedule.
    circuitFailures: 1_000,
  },
};

let first: TestApp;
let second: TestApp;
let failing: TestReceiver;
let firstStopped = false;

beforeAll(async () => {
  // A production subscription on the loopback receiver: each environment's wake-up queue is the point.
  first = await startTestApp({ config, productionLocalWebhooks: true });
  second = await startTestApp({
    config,
    productionLocalWebhooks: true,
    databaseUrl: first.databaseUrl,
    masterKey: first.masterKey,
    internalToken: first.internalToken,
  });
  failing = await startReceiver(() => ({ status: 500, body: "down" }));
});
afterAll(async () => {
  await failing?.close();
  if (!firstStopped) await first?.stop();
  await second?.stop();
});

describe("scheduled attempts", () => {
  it("each start within 1 s of the delivery's nextAttemptAt, with no sweeper, across two workers", async () => {
    const p = await createPartner(first);
    // One subscription per environment: their wake-ups come from different queues.
    for (const key of [p.sandboxKey, p.liveKey])
      await createWebhook(first.partnerUrl, key, { url: failing.url, events: ["*"] });
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const raised = await raiseEvent(first.app, {
        partnerId: p.partnerId,
        environment: i % 2 ? "sandbox" : "production",
        type: "consent.granted",
      });
      ids.push(...raised.deliveryIds);
    }
    expect(ids.length).toBe(10);

    // What each delivery showed as its next attempt's time after each failed attempt, read as it happens.
    const planned = new Map<string, Date>();
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const rows = await sql<{ id: string; attempts: number; next_attempt_at: Date | null }>(
          second.app.orm.em.fork(),
          "select id, attempts, next_attempt_at from webhook_deliveries where id = any($1::text[])",
          [ids],
        );
        for (const r of rows) if (r.next_attempt_at) planned.set(`${r.id}:${r.attempts}`, r.next_attempt_at);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const attempts = () =>
      sql<{ delivery_id: string; attempt: number; started_at: Date }>(
        second.app.orm.em.fork(),
        "select delivery_id, attempt, started_at from webhook_attempts where delivery_id = any($1::text[])",
        [ids],
      );
    const reach = (n: number, timeoutMs: number) =>
      eventually(async () => ((await attempts()).length >= n ? true : undefined), {
        timeoutMs,
        what: `${n} attempts`,
      });

    try {
      await reach(10, 10_000);
      // The worker that made some of the first attempts, and holds their retries on its timer, goes away.
      await first.stop();
      firstStopped = true;
      await reach(20, 15_000);
      await reach(30, retrySchedule.delaysMs[1] * 1.1 + 10_000);
    } finally {
      watching = false;
      await watch;
    }

    const late: number[] = [];
    for (const a of await attempts()) {
      if (a.attempt === 1) continue;
      const due = planned.get(`${a.delivery_id}:${a.attempt - 1}`);
      expect(due, `the time planned for attempt ${a.attempt} of ${a.delivery_id}`).toBeDefined();
      late.push(a.started_at.getTime() - (due as Date).getTime());
    }
    expect(late.length).toBe(20);
    // Never early (beyond the clock's grain), and never more than a second late.
    expect(Math.min(...late)).toBeGreaterThanOrEqual(-50);
    expect(Math.max(...late), `lateness ${late.sort((x, y) => x - y).join(", ")} ms`).toBeLessThanOrEqual(
      1_000,
    );
  }, 90_000);
});
