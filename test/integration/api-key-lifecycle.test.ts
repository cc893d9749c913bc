import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { createPartner } from "../factories/partners.ts";
import { startAnotherInstance, startTestApp, type TestApp } from "../support/app.ts";
import { rest } from "../support/clients.ts";
import { eventually, settleChangeFeed } from "../support/wait.ts";

const clock = new ManualClock("2027-01-10T09:00:00Z");
let a: TestApp;
let b: TestApp;

beforeAll(async () => {
  a = await startTestApp({ clock });
  // A second instance on the same database: what one instance changes, the other must honour.
  b = await startAnotherInstance(a, { clock });
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

const status = async (t: TestApp, key: string) => {
  const res = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key });
  return res.status === 200 ? 200 : `${res.status} ${res.body.code}`;
};

describe("API key lifecycle", () => {
  it("keeps a rolled key working on every instance until its overlap ends, then answers api_key_expired", async () => {
    const p = await createPartner(a);
    // Both instances have the old key cached before the roll.
    expect(await status(a, p.sandboxKey)).toBe(200);
    expect(await status(b, p.sandboxKey)).toBe(200);
    const rolled = await a.internal.apiKeys.rollApiKey({ keyId: p.sandboxKeyId, expiresInHours: 24 });
    clock.advance(24 * ms.hour - 1);
    for (const t of [a, b]) {
      expect(await status(t, p.sandboxKey)).toBe(200);
      expect(await status(t, rolled.key)).toBe(200);
    }
    clock.advance(1);
    for (const t of [a, b]) {
      await eventually(async () => (await status(t, p.sandboxKey)) === "401 api_key_expired", {
        timeoutMs: 2_000,
      });
      expect(await status(t, rolled.key)).toBe(200);
    }
  });

  it("revokes at once on the instance that revoked, and on the others as soon as the change commits", async () => {
    const p = await createPartner(a);
    expect(await status(a, p.liveKey)).toBe(200);
    expect(await status(b, p.liveKey)).toBe(200);
    await b.internal.apiKeys.revokeApiKey({ keyId: p.liveKeyId });
    expect(await status(b, p.liveKey)).toBe("401 api_key_revoked");
    await eventually(async () => (await status(a, p.liveKey)) === "401 api_key_revoked", {
      timeoutMs: 2_000,
    });
    // And it stays revoked: a later roll is refused.
    await expect(a.internal.apiKeys.rollApiKey({ keyId: p.liveKeyId })).rejects.toThrow(/revoked/);
  });

  it("ends a key rolled with no overlap at once on the instance that rolled it", async () => {
    // The old key is cached, and the roll's NOTIFY may reach this instance after the caller has its answer
    // (it did, on a loaded machine): the instance drops the key itself before the roll returns.
    const keys = b.app.services.apiKeys;
    const em = () => b.app.orm.em.fork();
    const p = await createPartner(a);
    // The fixture's own key issues reach b through the feed; one landing mid-lookup would (rightly) keep
    // the lookup from being remembered.
    await settleChangeFeed(b.app);
    await keys.authenticate(em, p.sandboxKey);
    expect(keys.knows(`Bearer ${p.sandboxKey}`)).toBe(true);
    const rolled = await keys.roll(em(), p.sandboxKeyId, 0);
    await expect(keys.authenticate(em, p.sandboxKey)).rejects.toMatchObject({ code: "api_key_expired" });
    await expect(keys.authenticate(em, rolled.key)).resolves.toMatchObject({ partnerId: p.partnerId });
  });

  it("does not cache what a lookup read when a change to any key arrived while it ran", async () => {
    const keys = a.app.services.apiKeys;
    const em = () => a.app.orm.em.fork();
    const p = await createPartner(a);
    await settleChangeFeed(a.app);
    /** The key revoked in the database alone: only a lookup that reads the database sees it. */
    const revokeQuietly = (id: string) =>
      sql(em(), "update api_keys set revoked_at = now() where id = $1", [id]);
    const outcome = (key: string) =>
      keys.authenticate(em, key).then(
        () => "ok",
        (e: unknown) => (e as { code?: string }).code,
      );
    // The lookup is on the wire when the change arrives: what it read may predate the change, so it is not kept,
    // and the next call reads the key again (and finds it revoked).
    const inFlight = keys.authenticate(em, p.liveKey);
    a.app.changes.emitLocal("api_key", p.liveKeyId);
    await inFlight;
    await revokeQuietly(p.liveKeyId);
    expect(await outcome(p.liveKey)).toBe("api_key_revoked");
    // A lookup with nothing changing under it is kept: the quiet revocation is not seen until a change is told.
    expect(await outcome(p.sandboxKey)).toBe("ok");
    await revokeQuietly(p.sandboxKeyId);
    expect(await outcome(p.sandboxKey)).toBe("ok");
    a.app.changes.emitLocal("api_key", p.sandboxKeyId);
    expect(await outcome(p.sandboxKey)).toBe("api_key_revoked");
  });

  it("lists a partner's keys with their states and never their secrets", async () => {
    const p = await createPartner(a);
    await a.internal.apiKeys.revokeApiKey({ keyId: p.liveKeyId });
    const { apiKeys } = await a.internal.apiKeys.listApiKeys({ partnerId: p.partnerId });
    expect(apiKeys.map((k) => [k.environment, k.status, k.prefix.length])).toEqual(
      expect.arrayContaining([
        ["sandbox", 1 /* ACTIVE */, 12],
        ["production", 4 /* REVOKED */, 12],
      ]),
    );
    expect(JSON.stringify(apiKeys, (_k, v) => (typeof v === "bigint" ? String(v) : v))).not.toContain(
      p.sandboxKey,
    );
  });
});
