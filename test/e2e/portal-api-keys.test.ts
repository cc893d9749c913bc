import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKey_Status, ApiKeyService } from "../../gen/partner/v1/api_keys_pb.ts";
import { TeamService } from "../../gen/portal/v1/team_pb.ts";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { errorInfoOf, rest } from "../support/clients.ts";
import { type MemberFixture, member } from "../support/portal.ts";

// The partner's API keys managed from the portal: the partner API's ApiKeyService, called with a session
// cookie, on the same rules as the operator's command line (one active key per environment, a roll's overlap,
// revocation at once), each write in the audit log.
const clock = new ManualClock();
let t: TestApp;
let partnerId: string;
let dev: MemberFixture;
let admin: MemberFixture;

/** The contract code a call failed with, or "ok". */
const code = async (p: Promise<unknown>) => {
  try {
    await p;
    return "ok";
  } catch (err) {
    return errorInfoOf(err)?.reason ?? Code[ConnectError.from(err).code];
  }
};
/** The status of a REST call made with `key`: a key that works answers 200. */
const keysCall = (key: string) => rest(t.partnerUrl, "GET", "/partner/v1/keys", { key });
/** Moves the clock on, in steps short of the sessions' 30 idle minutes, with a call from each person. */
const advance = async (total: number) => {
  for (let left = total; left > 0; left -= 20 * ms.minute) {
    clock.advance(Math.min(left, 20 * ms.minute));
    for (const m of [dev, admin]) await m.browser.client(ApiKeyService).listApiKeys({});
  }
};
const seconds = (ts: { seconds: bigint } | undefined) => Number(ts?.seconds ?? 0n);

beforeAll(async () => {
  t = await startTestApp({ clock });
  // A partner with no keys yet: its people issue the first ones.
  const { partner } = await t.internal.partners.createPartner({ name: "Keyless Lending", feeRateBps: 150 });
  partnerId = partner?.id ?? "";
  dev = await member(t, clock, partnerId, "developer");
  admin = await member(t, clock, partnerId, "admin");
});
afterAll(() => t?.stop());

describe("API keys in the portal", () => {
  it("a developer issues, rolls with an overlap and revokes; each key works, or fails, at once", async () => {
    const keys = dev.browser.client(ApiKeyService);
    expect((await keys.listApiKeys({})).apiKeys).toEqual([]);

    const issued = await keys.issueApiKey({});
    expect(issued.key).toMatch(/^sk_sandbox_[0-9A-Za-z]{32}$/);
    expect(issued.apiKey).toMatchObject({
      id: expect.stringMatching(/^key_/),
      environment: "sandbox",
      prefix: issued.key.slice(0, 12),
      status: ApiKey_Status.ACTIVE,
    });
    expect((await keysCall(issued.key)).status).toBe(200);
    // One active key per environment: the second is refused until the first is rolled.
    expect(await code(keys.issueApiKey({}))).toBe("api_key_exists");

    // Listed without its secret.
    const listed = await keys.listApiKeys({});
    expect(listed.apiKeys.map((k) => [k.id, k.status])).toEqual([[issued.apiKey?.id, ApiKey_Status.ACTIVE]]);
    const wire = await fetch(`${t.partnerUrl}/partner.v1.ApiKeyService/ListApiKeys`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "connect-protocol-version": "1",
        origin: t.partnerUrl,
        cookie: dev.browser.cookie ?? "",
        "x-portal-environment": "sandbox",
      },
      body: "{}",
    });
    const text = await wire.text();
    expect(Object.keys(JSON.parse(text).apiKeys[0]).sort()).toEqual([
      "createdAt",
      "environment",
      "id",
      "prefix",
      "status",
    ]);
    expect(text).not.toContain(issued.key.slice(12));

    // A roll: both keys work until the old one's end.
    const rolled = await keys.rollApiKey({ id: issued.apiKey?.id ?? "", expiresInHours: 2 });
    expect(rolled.key).toMatch(/^sk_sandbox_/);
    expect(rolled.oldApiKey?.status).toBe(ApiKey_Status.EXPIRING);
    expect(seconds(rolled.oldApiKey?.expiresAt) * 1000).toBe(
      Math.floor((clock.now().getTime() + 2 * ms.hour) / 1000) * 1000,
    );
    expect((await keysCall(issued.key)).status).toBe(200);
    expect((await keysCall(rolled.key)).status).toBe(200);
    expect((await keys.listApiKeys({})).apiKeys.map((k) => k.status)).toEqual([
      ApiKey_Status.ACTIVE,
      ApiKey_Status.EXPIRING,
    ]);
    await advance(2 * ms.hour + ms.second);
    const expired = await keysCall(issued.key);
    expect([expired.status, expired.body.code]).toEqual([401, "api_key_expired"]);
    expect((await keysCall(rolled.key)).status).toBe(200);

    // The default overlap is 24 hours, as the command line's.
    const again = await keys.rollApiKey({ id: rolled.apiKey?.id ?? "" });
    expect(seconds(again.oldApiKey?.expiresAt)).toBe(
      Math.floor((clock.now().getTime() + 24 * ms.hour) / 1000),
    );

    // Revoked: refused at once.
    const revoked = await keys.revokeApiKey({ id: again.apiKey?.id ?? "" });
    expect(revoked.apiKey?.status).toBe(ApiKey_Status.REVOKED);
    expect(revoked.apiKey?.revokedAt).toBeDefined();
    const refused = await keysCall(again.key);
    expect([refused.status, refused.body.code]).toEqual([401, "api_key_revoked"]);
    // Revoking the rolled-from key too ends its overlap at once.
    await keys.revokeApiKey({ id: rolled.apiKey?.id ?? "" });
    expect((await keysCall(rolled.key)).body.code).toBe("api_key_revoked");
    // With no active key left, a new one may be issued; the operator sees the same keys.
    const fresh = await keys.issueApiKey({});
    expect((await keysCall(fresh.key)).status).toBe(200);
    const operator = await t.internal.apiKeys.listApiKeys({ partnerId });
    expect(operator.apiKeys.filter((k) => k.environment === "sandbox").map((k) => k.id)).toEqual(
      (await keys.listApiKeys({})).apiKeys.map((k) => k.id),
    );
  });

  it("records each issue, roll and revoke in the audit log, with the key's id and the outcome", async () => {
    const { events } = await admin.browser.client(TeamService).listAuditEvents({ limit: 100 });
    const calls = events
      .filter((e) => e.action === "api_call" && e.detail.startsWith("partner.v1.ApiKeyService/"))
      .reverse();
    expect(calls.map((e) => [e.detail.split("/")[1], e.outcome])).toEqual([
      ["IssueApiKey", "ok"],
      ["IssueApiKey", "api_key_exists"],
      ["RollApiKey", "ok"],
      ["RollApiKey", "ok"],
      ["RevokeApiKey", "ok"],
      ["RevokeApiKey", "ok"],
      ["IssueApiKey", "ok"],
    ]);
    for (const e of calls) {
      expect(e).toMatchObject({ actor: dev.id, actorEmail: dev.email, environment: "sandbox" });
      if (e.outcome === "ok") expect(e.target).toMatch(/^key_/);
    }
  });

  it("works in the environment the person selected, and only there", async () => {
    admin.browser.environment = "production";
    try {
      const keys = admin.browser.client(ApiKeyService);
      expect((await keys.listApiKeys({})).apiKeys).toEqual([]);
      const live = await keys.issueApiKey({});
      expect(live.key).toMatch(/^sk_live_/);
      expect(live.apiKey?.environment).toBe("production");
      expect((await keys.listApiKeys({})).apiKeys.map((k) => k.id)).toEqual([live.apiKey?.id]);
      const doc = await keysCall(live.key);
      expect(doc.body.keys.every((k: { environment: string }) => k.environment === "production")).toBe(true);
    } finally {
      admin.browser.environment = "sandbox";
    }
    const sandbox = await admin.browser.client(ApiKeyService).listApiKeys({});
    expect(sandbox.apiKeys.every((k) => k.environment === "sandbox")).toBe(true);
  });

  it("lets a viewer list, never issue, roll or revoke (403 permission_denied)", async () => {
    const viewer = await member(t, clock, partnerId, "viewer");
    const keys = viewer.browser.client(ApiKeyService);
    const { apiKeys } = await keys.listApiKeys({});
    const active = apiKeys.find((k) => k.status === ApiKey_Status.ACTIVE);
    expect(active).toBeDefined();
    const id = active?.id ?? "";
    expect(await code(keys.issueApiKey({}))).toBe("permission_denied");
    expect(await code(keys.rollApiKey({ id }))).toBe("permission_denied");
    expect(await code(keys.revokeApiKey({ id }))).toBe("permission_denied");
    const after = await keys.listApiKeys({});
    expect(after.apiKeys).toHaveLength(apiKeys.length);
    expect(after.apiKeys.find((k) => k.id === id)?.status).toBe(ApiKey_Status.ACTIVE);
  });
});
