import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner } from "../factories/partners.ts";
import { startAnotherInstance, startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";

// A key that leaked is revoked (or rolled with no overlap) while whoever holds it keeps a hundred calls in
// flight on two instances. Once the revoke has answered, no call that starts afterwards on the instance that
// revoked may be served, and on the other none that starts once the change has had a moment to arrive; nothing
// fails with a 5xx meanwhile.
let a: TestApp;
let b: TestApp;

beforeAll(async () => {
  a = await startTestApp();
  b = await startAnotherInstance(a);
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

interface Call {
  on: "a" | "b";
  startedAt: number;
  status: number;
}

/** Fifty callers per instance using `key` until `stop` resolves; every call's start and answer. */
async function hammer(key: string, stop: Promise<unknown>): Promise<Call[]> {
  const calls: Call[] = [];
  let stopped = false;
  void stop.then(() => {
    stopped = true;
  });
  const caller = async (on: "a" | "b", t: TestApp) => {
    while (!stopped) {
      const startedAt = performance.now();
      const res = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key });
      calls.push({ on, startedAt, status: res.status });
    }
  };
  await Promise.all(Array.from({ length: 100 }, (_, i) => (i % 2 ? caller("a", a) : caller("b", b))));
  return calls;
}

describe("a key changed while a hundred calls use it", () => {
  for (const change of ["revoked", "rolled with no overlap"] as const) {
    it(`is refused on every call that starts after it was ${change}`, async () => {
      const p = await createPartner(a);
      let stop: () => void = () => undefined;
      const stopped = new Promise<void>((resolve) => {
        stop = resolve;
      });
      const calls = hammer(p.sandboxKey, stopped);
      // Let both instances serve (and cache) the key under load first.
      await new Promise((r) => setTimeout(r, 500));
      if (change === "revoked") await b.internal.apiKeys.revokeApiKey({ keyId: p.sandboxKeyId });
      else await b.internal.apiKeys.rollApiKey({ keyId: p.sandboxKeyId, expiresInHours: 0 });
      const changedAt = performance.now();
      await new Promise((r) => setTimeout(r, 2_500));
      stop();
      const all = await calls;

      expect(all.filter((c) => c.startedAt < changedAt && c.status === 200).length).toBeGreaterThan(0);
      expect(all.filter((c) => c.status >= 500)).toEqual([]);
      // The instance that made the change: at once.
      const afterOnB = all.filter((c) => c.on === "b" && c.startedAt > changedAt);
      expect(afterOnB.length).toBeGreaterThan(0);
      expect(afterOnB.filter((c) => c.status === 200)).toEqual([]);
      // The other: as soon as the change has reached it (a NOTIFY: within a second, even on a loaded machine).
      const afterOnA = all.filter((c) => c.on === "a" && c.startedAt > changedAt + 1_000);
      expect(afterOnA.length).toBeGreaterThan(0);
      expect(afterOnA.filter((c) => c.status === 200)).toEqual([]);
      // Refused as a failed authentication, or once the address has failed too often, 429.
      for (const c of all) expect([200, 401, 429]).toContain(c.status);
    });
  }
});
