import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { retrySchedule } from "../../src/webhooks/schedule.ts";
import { createWebhook } from "../factories/events.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { deliveryProbe } from "../support/deliveries.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";

// Every attempt here is meant to time out: short time-outs keep the two weeks of attempts quick, and a busy
// machine can only make an attempt time out sooner, which is what is asserted.
const clock = new ManualClock("2027-03-01T08:00:00Z");
let t: TestApp;
let partner: PartnerFixture;
let receiver: TestReceiver;
let probe: ReturnType<typeof deliveryProbe>;

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
  probe = deliveryProbe(t, partner);
});
afterAll(async () => {
  receiver?.release();
  await receiver?.close();
  await t?.stop();
});

describe("an endpoint that never answers", () => {
  it("gives up an endpoint that never answers 14 days after the event, on the schedule, and not one attempt later", async () => {
    const hook = await createWebhook(t.partnerUrl, partner.sandboxKey, { url: receiver.url, events: ["*"] });
    receiver.answer = () => "hang";
    const d = await probe.sendTest(hook.id);
    const created = (await probe.delivery(d.id)).created_at.getTime();
    await probe.attemptsReach(d.id, 1);
    for (let guard = 0; guard < 60; guard++) {
      const row = await probe.delivery(d.id);
      if (row.status === "GIVEN_UP") break;
      expect(row.status).toBe("FAILED");
      clock.set(row.next_attempt_at);
      await t.app.services.deliveryWorker.processBatch(t.app.orm.em.fork(), [d.id]);
    }
    const final = await probe.delivery(d.id);
    expect(final.status).toBe("GIVEN_UP");
    expect(final.given_up_at.getTime()).toBe(created + retrySchedule.windowMs);
    const all = await probe.attempts(d.id);
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
    expect((await probe.attempts(d.id)).length).toBe(all.length);
    expect(sentOfThis()).toBeLessThanOrEqual(all.length);
    receiver.release();
    receiver.answer = () => ({ status: 200 });
  });
});
