import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/platform/clock.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { productionPasswordCost } from "../support/portal.ts";

// A burst of sign-ins at the real password cost, beside a partner's API call (the rest of the portal against
// someone trying: portal.test.ts). Its bounds are times under the load the burst makes, so this file runs with
// the few that have the machine to themselves (vitest.config.ts).
let t: TestApp;
let b: PartnerFixture;

/** A raw Connect JSON call, headers as given. */
const raw = (path: string, headers: Record<string, string>, body: unknown = {}) =>
  fetch(`${t.partnerUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

beforeAll(async () => {
  t = await startTestApp({ clock: new ManualClock() });
  b = await createPartner(t);
});
afterAll(() => t?.stop());

describe("a burst of sign-ins", () => {
  it("is answered in bounded time, each 401, 429 or 503 with Retry-After, while the API keeps serving", async () => {
    // At the real cost: the point is what a burst of real hashes does to everything else.
    using _ = productionPasswordCost();
    const started = Date.now();
    const answers = Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        raw(
          "/portal.v1.PortalAuthService/SignIn",
          { origin: t.partnerUrl, "connect-protocol-version": "1" },
          { email: `burst-${i}@example.com`, password: "not the password at all", code: "000000" },
        ).then(async (r) => ({
          status: r.status,
          retryAfter: r.headers.get("retry-after"),
          body: await r.text(),
        })),
      ),
    );
    // A partner's API calls during the burst are not held behind the password hashes.
    const during = Date.now();
    const bystander = await fetch(`${t.partnerUrl}/partner/v1/keys`, {
      headers: { authorization: `Bearer ${b.sandboxKey}` },
    });
    expect(bystander.status).toBe(200);
    expect(Date.now() - during).toBeLessThan(2_000);
    const all = await answers;
    expect(Date.now() - started).toBeLessThan(25_000);
    for (const a of all) {
      expect([401, 429, 503], a.body).toContain(a.status);
      if (a.status !== 401) expect(Number(a.retryAfter)).toBeGreaterThanOrEqual(1);
    }
    // An address's failures are charged before the password hash: from one address at most its 20 reach
    // the hashing (two at a time, a bounded queue, 503 with Retry-After for what does not fit), the rest
    // are 429 at once, never a wait without end.
    expect(all.filter((a) => a.status === 401 || a.status === 503).length).toBeLessThanOrEqual(20);
    expect(all.filter((a) => a.status === 429).length).toBeGreaterThanOrEqual(280);
    expect((await fetch(`${t.partnerUrl}/healthz`)).status).toBe(200);
  }, 60_000);
});
