import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { eventually, settleChangeFeed } from "../support/wait.ts";

// A flood of guessed API keys must not cost a database query each.
let t: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
  // The fixture's keys were announced; their echoes must not land between the first miss and the next call.
  await settleChangeFeed(t.app);
});
afterAll(() => t?.stop());

/** Authenticates as the edge does, counting the units of work (each one a database query) it needs. */
async function authenticate(secret: string): Promise<{ code: string; queries: number }> {
  let queries = 0;
  const em = () => {
    queries++;
    return t.app.orm.em.fork();
  };
  try {
    await t.app.services.apiKeys.authenticate(em, secret);
    return { code: "ok", queries };
  } catch (err) {
    return { code: (err as { code: string }).code, queries };
  }
}

describe("unknown API keys", () => {
  it("are answered without a query after the first, until any key changes", async () => {
    const guess = `sk_sandbox_${"x".repeat(32)}`;
    expect(await authenticate(guess)).toEqual({ code: "invalid_api_key", queries: 1 });
    for (let i = 0; i < 50; i++)
      expect(await authenticate(guess)).toEqual({ code: "invalid_api_key", queries: 0 });
    // Over HTTP too: still 401 invalid_api_key.
    const res = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: guess });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe("invalid_api_key");

    // A key issued anywhere may be the guessed one: every instance forgets what it knew was unknown.
    const rolled = await t.internal.apiKeys.rollApiKey({ keyId: p.sandboxKeyId, expiresInHours: 1 });
    expect(rolled.key).toMatch(/^sk_sandbox_/);
    await eventually(async () => (await authenticate(guess)).queries === 1);
    expect((await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: rolled.key })).status).toBe(200);
  });
});

describe("unknown hosted-page tokens", () => {
  it("are answered from memory after the first miss, on the consent and the mandate page alike", async () => {
    const token = "G".repeat(32);
    const untouchable = new Proxy({} as never, {
      get() {
        throw new Error("the database was asked");
      },
    });
    const services = t.app.services;
    await expect(services.consentLinks.page(t.app.orm.em.fork(), token)).rejects.toMatchObject({
      code: "not_found",
    });
    await expect(services.consentLinks.page(untouchable, token)).rejects.toMatchObject({ code: "not_found" });
    await expect(services.mandates.page(t.app.orm.em.fork(), token)).rejects.toMatchObject({
      code: "not_found",
    });
    await expect(services.mandates.page(untouchable, token)).rejects.toMatchObject({ code: "not_found" });
    // Over HTTP: 404 every time.
    for (const path of [`/consent/${token}`, `/mandate/${token}`])
      expect((await fetch(`${t.partnerUrl}${path}`)).status).toBe(404);
  });
});
