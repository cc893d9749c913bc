import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADDRESS_LIMITS, createAddressGuard } from "../../src/ratelimit/limiters.service.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectFrom, statusOn } from "../support/raw-http.ts";
import { settleChangeFeed } from "../support/wait.ts";

// Traffic no API key can limit: guessed keys and the hosted pages, from one client address.
let t: TestApp;
let p: PartnerFixture;
// The buckets refill on this clock, which only the tests move: on the wall clock, how many tokens come back
// while a burst is sent would depend on how fast this machine answers (a loaded one refills a bucket as fast
// as it drains it, and never refuses anything).
let guardNow = 0;
const elapse = (ms: number) => {
  guardNow += ms;
};
beforeAll(async () => {
  t = await startTestApp();
  // The service's own guard, its limits unchanged, reading the tests' clock (the listener holds this object).
  Object.assign(t.app.services.addressGuard, createAddressGuard({ ...ADDRESS_LIMITS, now: () => guardNow }));
  p = await createPartner(t);
});
afterAll(() => t?.stop());

const get = (path: string, key?: string) =>
  fetch(`${t.partnerUrl}${path}`, { headers: key ? { authorization: `Bearer ${key}` } : {} });

describe("limits per client address", () => {
  it("stop an address that keeps failing to authenticate, with 429 and Retry-After, then let it back", async () => {
    const burst = ADDRESS_LIMITS.failures.capacity;
    const statuses: number[] = [];
    for (let i = 0; i < burst + 20; i++) {
      const res = await get("/partner/v1/keys", `sk_live_${String(i).padStart(32, "0")}`);
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    expect(statuses.slice(0, burst - 5).every((s) => s === 401)).toBe(true);
    const refused = await get("/partner/v1/keys", p.sandboxKey);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(((await refused.json()) as { code: string }).code).toBe("rate_limited");
    // Health checks are never limited, and the address is let back as its bucket refills.
    expect((await get("/healthz")).status).toBe(200);
    elapse(Number(refused.headers.get("retry-after")) * 1000);
    expect((await get("/partner/v1/keys", p.sandboxKey)).status).toBe(200);
  });

  it("never lock out a key this instance knows, however many guesses share its address", async () => {
    const q = await createPartner(t);
    // The fixture's own key issues echo back through the change feed; one landing mid-lookup would (rightly)
    // keep the lookup from being remembered, and the key would not yet be one this instance knows.
    await settleChangeFeed(t.app);
    expect((await get("/partner/v1/keys", q.sandboxKey)).status).toBe(200);
    expect(t.app.services.apiKeys.knows(`Bearer ${q.sandboxKey}`)).toBe(true);
    const guesses = await Promise.all(
      Array.from({ length: ADDRESS_LIMITS.failures.capacity + 50 }, async (_, i) => {
        const res = await get("/partner/v1/keys", `sk_live_${String(i).padStart(31, "0")}x`);
        await res.arrayBuffer();
        return res.status;
      }),
    );
    expect(guesses.filter((s) => s === 429).length).toBeGreaterThan(0);
    // The known key goes on working; another guess from the address is still refused without a query.
    for (let i = 0; i < 5; i++) expect((await get("/partner/v1/keys", q.sandboxKey)).status).toBe(200);
    const more = await Promise.all(
      Array.from(
        { length: 20 },
        async (_, i) =>
          (await get("/partner/v1/keys", `sk_live_${"y".repeat(30)}${String(i).padStart(2, "0")}`)).status,
      ),
    );
    expect(more.filter((s) => s === 429).length).toBeGreaterThanOrEqual(10);
    expect(more.every((s) => s === 401 || s === 429)).toBe(true);
  });

  it("hold guesses sent all at once to what the address's bucket has", async () => {
    // From an address of its own (all of 127/8 is loopback), so its bucket is full when the burst starts. Every
    // connection is open before any guess is written, so all of them arrive before the first is answered.
    const capacity = ADDRESS_LIMITS.failures.capacity;
    const sockets = await Promise.all(
      Array.from({ length: capacity * 3 }, () => connectFrom(t.partnerUrl, "127.0.0.7")),
    );
    const answers = sockets.map(statusOn);
    sockets.forEach((s, i) => {
      s.write(
        `GET /partner/v1/keys HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer sk_live_${String(i).padStart(30, "0")}zz\r\n\r\n`,
      );
    });
    const statuses = await Promise.all(answers);
    // Each guess takes its token on arrival, before any is answered: at most the bucket, and what it refills
    // while the burst lasts (10 a second), get as far as a query.
    const weighed = statuses.filter((s) => s === 401).length;
    expect(weighed).toBeGreaterThanOrEqual(capacity - 5);
    expect(weighed).toBeLessThanOrEqual(capacity + 30);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(capacity * 2 - 30);
    expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
  });

  it("limit requests to the hosted pages, which need no key", async () => {
    const { capacity, refillPerSecond } = ADDRESS_LIMITS.pages;
    const statuses: number[] = [];
    const started = performance.now();
    // Bursts until the address is refused: however slowly this machine sends them, the bucket runs dry once more
    // pages are asked for than it holds and refills meanwhile.
    while (!statuses.includes(429) && statuses.length < 20 * capacity) {
      statuses.push(
        ...(await Promise.all(
          Array.from({ length: 100 }, async () => {
            const res = await get(`/consent/${"A".repeat(32)}`);
            await res.arrayBuffer();
            return res.status;
          }),
        )),
      );
    }
    const seconds = (performance.now() - started) / 1000;
    const served = statuses.filter((s) => s === 404).length;
    expect(statuses).toContain(429);
    expect(served).toBeGreaterThanOrEqual(capacity - 10);
    // Never more than the bucket and what it refilled while the bursts lasted.
    expect(served).toBeLessThanOrEqual(capacity + Math.ceil(seconds * refillPerSecond) + 100);
    expect(statuses.every((s) => s === 404 || s === 429)).toBe(true);
  });
});
