import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, rest } from "../support/clients.ts";
import { openPage, submit } from "../support/consent-page.ts";
import { startReceiver, type TestReceiver } from "../support/receiver.ts";
import { eventually } from "../support/wait.ts";

let t: TestApp;
let p: PartnerFixture;
let receiver: TestReceiver;

beforeAll(async () => {
  t = await startTestApp({
    config: {
      rateLimits: {
        read: { capacity: 1000, refillPerSecond: 1000 },
        write: { capacity: 5, refillPerSecond: 0.01 },
      },
    },
  });
  p = await createPartner(t);
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await t?.stop();
});

const scrape = async (token = t.internalToken) =>
  fetch(`${t.internalUrl}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
/** The value of one sample, 0 when absent. */
const sample = (text: string, name: string, labels: Record<string, string>) => {
  const line = text
    .split("\n")
    .find(
      (l) =>
        (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) &&
        Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)),
    );
  return line ? Number(line.split(" ").pop()) : 0;
};

describe("/metrics", () => {
  it("needs the service token", async () => {
    expect((await scrape("")).status).toBe(401);
    expect((await scrape("wrong-token-wrong-token-wrong")).status).toBe(401);
    const ok = await scrape();
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  });

  it("counts requests per route template and face, rate-limit rejections, deliveries, payouts and queues", async () => {
    const hook = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: p.sandboxKey,
      body: { url: receiver.url, events: ["*"] },
    });
    await rest(t.partnerUrl, "GET", `/partner/v1/webhooks/${hook.body.id}`, { key: p.sandboxKey });
    await connectClient(KeysService, t.partnerUrl, `Bearer ${p.sandboxKey}`).listKeys({});
    await rest(t.partnerUrl, "POST", `/partner/v1/webhooks/${hook.body.id}/test`, {
      key: p.sandboxKey,
      body: {},
    });
    await eventually(() => receiver.received.length > 0);
    await t.internal.consents.grantConsent({
      userId: "usr_sandboxTrusted",
      partnerId: p.partnerId,
      scopes: ["standing"],
      ledgerWindowDays: 30,
    });
    const dsb = await rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
      key: p.sandboxKey,
      headers: { "idempotency-key": "metrics-1" },
      body: {
        userId: "usr_sandboxTrusted",
        principalKobo: "100000",
        destination: "WALLET",
        reference: "metrics-1",
        repaymentSchedule: {
          installments: [
            {
              dueDate: new Date(Date.now() + 9 * 86_400_000).toISOString().slice(0, 10),
              amountKobo: "110000",
            },
          ],
        },
        scheduleAcceptedAt: new Date().toISOString(),
      },
    });
    expect(dsb.status).toBe(200);
    // The write bucket (5) is now spent: the next write is refused.
    let refused = 0;
    for (let i = 0; i < 3; i++) {
      const r = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
        key: p.sandboxKey,
        body: { url: receiver.url, events: ["*"] },
      });
      if (r.status === 429) refused++;
    }
    expect(refused).toBeGreaterThan(0);
    // The person accepts on the mandate page (a page, not a partner write: no bucket is spent).
    const page = await openPage(dsb.body.acceptanceUrl);
    expect((await submit(dsb.body.acceptanceUrl, page, "accept")).status).toBe(200);

    const text = await eventually(async () => {
      const body = await (await scrape()).text();
      return sample(body, "payouts_total", { environment: "sandbox", outcome: "delivered" }) >= 1 &&
        sample(body, "webhook_delivery_attempts_total", { outcome: "delivered" }) >= 1
        ? body
        : undefined;
    });
    expect(
      sample(text, "http_requests_total", {
        face: "rest",
        route: "/partner/v1/webhooks/{id}",
        method: "GET",
        status: "200",
      }),
    ).toBe(1);
    expect(text).not.toContain(hook.body.id); // never an id in a label
    expect(
      sample(text, "http_requests_total", { face: "connect", route: "/partner.v1.KeysService/ListKeys" }),
    ).toBe(1);
    expect(sample(text, "http_request_duration_seconds_count", { route: "/partner/v1/webhooks/{id}" })).toBe(
      1,
    );
    expect(sample(text, "rate_limit_rejections_total", { class: "write" })).toBe(refused);
    expect(sample(text, "webhook_event_to_first_attempt_seconds_count", {})).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(/^# TYPE job_queue_depth gauge$/m);
    expect(text).toMatch(/^# TYPE webhook_deliveries_oldest_due_seconds gauge$/m);
    expect(text).toMatch(/^# TYPE payouts_in_flight gauge$/m);
    expect(text).toMatch(/^# TYPE debits_due gauge$/m);
  });
});
