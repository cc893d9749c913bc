import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner } from "../factories/partners.ts";
import { createConsentedUser } from "../factories/users.ts";
import { startAnotherInstance, startTestApp, type TestApp } from "../support/app.ts";
import { type RestResponse, rest } from "../support/clients.ts";
import { eventually } from "../support/wait.ts";

// Dedicated capacity (CONTRACT.md §8): the operator sets a partner's (or one key's) limits over the internal API,
// and two instances of the service on one database apply them within a second: RateLimit-Policy shows them and
// the shared buckets admit by them. Buckets that practically never refill, so the test counts tokens.

const defaults = {
  read: { capacity: 40, refillPerSecond: 0.001 },
  write: { capacity: 40, refillPerSecond: 0.001 },
};
const DEFAULT_POLICY = '"read";q=40;w=40000';

let a: TestApp;
let b: TestApp;

beforeAll(async () => {
  a = await startTestApp({ config: { rateLimits: defaults } });
  b = await startAnotherInstance(a, { config: { rateLimits: defaults } });
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

const read = (t: TestApp, key: string) => rest(t.partnerUrl, "GET", "/partner/v1/keys", { key });
const policy = (r: RestResponse) => r.headers.get("ratelimit-policy");

/**
 * Reads on both instances, alternating, until each has answered under `expected`; returns every answer after
 * the change and how long both took to show it.
 */
async function untilBothShow(key: string, expected: string) {
  const since = Date.now();
  const answers: RestResponse[] = [];
  const seen = new Set<TestApp>();
  while (seen.size < 2) {
    if (Date.now() - since > 5_000) throw new Error(`${expected} not shown by both instances`);
    for (const t of [a, b]) {
      const r = await read(t, key);
      answers.push(r);
      if (policy(r) === expected) seen.add(t);
    }
  }
  return { answers, elapsedMs: Date.now() - since };
}

describe("per-partner limits", () => {
  it("change RateLimit-Policy and what is admitted, on two instances, within a second of the change", async () => {
    const p = await createPartner(a);
    for (const t of [a, b]) expect(policy(await read(t, p.liveKey))).toBe(DEFAULT_POLICY);

    const set = await a.internal.partners.setPartnerLimits({
      partnerId: p.partnerId,
      environment: "production",
      limits: { read: { capacity: 3, refillPerSecond: 0.01 } },
    });
    expect(set.limits?.overrides?.read).toMatchObject({ capacity: 3, refillPerSecond: 0.01 });
    expect(set.limits?.effective?.write).toMatchObject(defaults.write);
    const { answers, elapsedMs } = await untilBothShow(p.liveKey, '"read";q=3;w=300');
    expect(elapsedMs).toBeLessThan(1_000);

    // The shared bucket was held to the new capacity at the change: 3 more reads in all, on both instances.
    while (answers.filter((r) => r.status === 429).length < 4)
      answers.push(await read(answers.length % 2 ? a : b, p.liveKey));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(3);
    for (const r of answers.filter((x) => x.status === 200 && policy(x) === '"read";q=3;w=300'))
      expect(r.headers.get("ratelimit")).toMatch(/^"read";r=[0-2];t=\d+$/);
    const refused = answers.at(-1);
    expect(refused?.body).toMatchObject({ code: "rate_limited" });
    expect(policy(refused as RestResponse)).toBe('"read";q=3;w=300');
    expect(Number(refused?.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);

    // The write bucket is untouched: a write (the webhook list is a read; a create is a write) still has 40.
    const write = await rest(b.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: p.liveKey,
      body: { url: "https://example.com/hooks", events: ["*"] },
    });
    expect(write.headers.get("ratelimit-policy")).toBe('"write";q=40;w=40000');

    // A raise is shown on both instances within a second too.
    await b.internal.partners.setPartnerLimits({
      partnerId: p.partnerId,
      environment: "production",
      limits: { read: { capacity: 1000, refillPerSecond: 500 } },
    });
    const raised = await untilBothShow(p.liveKey, '"read";q=1000;w=2');
    expect(raised.elapsedMs).toBeLessThan(1_000);
    await eventually(async () => (await read(a, p.liveKey)).status === 200, { what: "reads admitted again" });
  });

  it("a key's override wins over its partner's; clearing goes back to the partner's, then to the defaults", async () => {
    const p = await createPartner(a);
    await a.internal.partners.setPartnerLimits({
      partnerId: p.partnerId,
      environment: "sandbox",
      limits: { read: { capacity: 200, refillPerSecond: 50 }, snapshotConcurrency: 3 },
    });
    const own = await b.internal.apiKeys.setApiKeyLimits({
      keyId: p.sandboxKeyId,
      limits: { read: { capacity: 2, refillPerSecond: 0.5 } },
    });
    expect(own.limits).toMatchObject({
      keyId: p.sandboxKeyId,
      partnerId: p.partnerId,
      environment: "sandbox",
      overrides: { read: { capacity: 2, refillPerSecond: 0.5 } },
      effective: { read: { capacity: 2, refillPerSecond: 0.5 }, snapshotConcurrency: 3 },
    });
    expect((await untilBothShow(p.sandboxKey, '"read";q=2;w=4')).elapsedMs).toBeLessThan(1_000);

    const got = await a.internal.partners.getPartnerLimits({ partnerId: p.partnerId });
    const sandbox = got.environments.find((e) => e.environment === "sandbox");
    expect(sandbox?.keys.map((k) => k.keyId)).toEqual([p.sandboxKeyId]);
    expect(got.environments.find((e) => e.environment === "production")?.effective?.read).toMatchObject({
      capacity: 40,
    });

    await a.internal.apiKeys.setApiKeyLimits({ keyId: p.sandboxKeyId, reset: ["read"] });
    expect((await untilBothShow(p.sandboxKey, '"read";q=200;w=4')).elapsedMs).toBeLessThan(1_000);
    const cleared = await b.internal.partners.setPartnerLimits({
      partnerId: p.partnerId,
      environment: "sandbox",
      reset: ["all"],
    });
    expect(cleared.limits?.overrides?.read).toBeUndefined();
    expect(cleared.limits?.keys).toEqual([]);
    expect((await untilBothShow(p.sandboxKey, DEFAULT_POLICY)).elapsedMs).toBeLessThan(1_000);
  });

  it("set the limits on expensive work: the partner's own disbursements per user per day", async () => {
    const p = await createPartner(a);
    const u = await createConsentedUser(a, p.partnerId);
    await a.internal.partners.setPartnerLimits({
      partnerId: p.partnerId,
      environment: "sandbox",
      limits: { disbursementsPerUserPerDay: 1, write: { capacity: 1000, refillPerSecond: 100 } },
    });
    const due = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);
    const offer = (t: TestApp, ref: string) =>
      rest(t.partnerUrl, "POST", "/partner/v1/disbursements", {
        key: p.sandboxKey,
        headers: { "idempotency-key": ref },
        body: {
          userId: u.userId,
          principalKobo: "1000000",
          destination: "WALLET",
          reference: ref,
          repaymentSchedule: { installments: [{ dueDate: due, amountKobo: "1100000" }] },
        },
      });
    // Seen by the other instance within a second as well (the write policy is the sign).
    await eventually(
      async () => (await offer(b, "probe-1")).headers.get("ratelimit-policy")?.includes("q=1000"),
      {
        timeoutMs: 1_000,
        what: "instance b applying the partner's limits",
      },
    );
    const second = await offer(b, "second");
    expect(second.status).toBe(429);
    expect(second.body).toMatchObject({ code: "user_daily_disbursement_limit", details: { limit: 1 } });
  });
});
