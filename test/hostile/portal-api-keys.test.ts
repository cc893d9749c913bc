import { Code, ConnectError } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKey_Status, ApiKeyService } from "../../gen/partner/v1/api_keys_pb.ts";
import { TeamService } from "../../gen/portal/v1/team_pb.ts";
import { ManualClock } from "../../src/platform/clock.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, errorInfoOf, grpcUnary, grpcWebClient, rest } from "../support/clients.ts";
import { type MemberFixture, member } from "../support/portal.ts";

/** The four REST routes of `partner.v1.ApiKeyService`, for key `id`, with a body each accepts. */
const apiKeyRoutes = (id: string) =>
  [
    ["GET", "/partner/v1/api-keys", undefined],
    ["POST", "/partner/v1/api-keys", {}],
    ["POST", `/partner/v1/api-keys/${id}/roll`, { expiresInHours: 168 }],
    ["POST", `/partner/v1/api-keys/${id}/revoke`, {}],
  ] as const;

// API key management against someone trying: a key (leaked, or the partner's own) minting, rolling or
// extending keys on any face; one partner's people reaching another's keys or another environment's; a
// viewer writing; out-of-range overlaps; secrets leaking into the audit log or the logs.
const clock = new ManualClock();
const logs: string[] = [];
let t: TestApp;
let a: PartnerFixture;
let b: PartnerFixture;
let devA: MemberFixture;
let adminA: MemberFixture;

const code = async (p: Promise<unknown>) => {
  try {
    await p;
    return "ok";
  } catch (err) {
    return errorInfoOf(err)?.reason ?? Code[ConnectError.from(err).code];
  }
};
/** A key works when the key document answers it. */
const works = async (key: string) =>
  (await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key })).status === 200;
const keysOf = async (partnerId: string) =>
  (await t.internal.apiKeys.listApiKeys({ partnerId })).apiKeys.map((k) => [k.id, k.status]);

beforeAll(async () => {
  t = await startTestApp({ clock, onLog: (line) => logs.push(line) });
  a = await createPartner(t);
  b = await createPartner(t);
  devA = await member(t, clock, a.partnerId, "developer");
  adminA = await member(t, clock, a.partnerId, "admin");
});
afterAll(() => t?.stop());

describe("an API key", () => {
  it("can never list, issue, roll or revoke keys, on any face (403 permission_denied)", async () => {
    const before = await keysOf(a.partnerId);
    for (const [key, id] of [
      [a.sandboxKey, a.sandboxKeyId],
      [a.liveKey, a.liveKeyId],
    ] as const) {
      const authorization = `Bearer ${key}`;
      // REST, with and without an Idempotency-Key; every answer is checked against the OpenAPI document.
      for (const [method, path, body] of apiKeyRoutes(id)) {
        const withKey: Record<string, string> = { "idempotency-key": `k-${method}-${path}` };
        for (const headers of [{}, withKey]) {
          const res = await rest(t.partnerUrl, method, path, { key, body, headers });
          expect([res.status, res.body.code], `${method} ${path}`).toEqual([403, "permission_denied"]);
          expect(res.body.message).toBe("API keys are managed in the partner portal.");
        }
      }
      // Connect and gRPC-Web.
      for (const client of [
        connectClient(ApiKeyService, t.partnerUrl, authorization),
        grpcWebClient(ApiKeyService, t.partnerUrl, authorization),
      ]) {
        expect(await code(client.listApiKeys({}))).toBe("permission_denied");
        expect(await code(client.issueApiKey({}))).toBe("permission_denied");
        expect(await code(client.rollApiKey({ id, expiresInHours: 168 }))).toBe("permission_denied");
        expect(await code(client.revokeApiKey({ id }))).toBe("permission_denied");
      }
      // gRPC, with an implementation independent of ours.
      const m = ApiKeyService.method;
      for (const [method, request] of [
        [m.listApiKeys, {}],
        [m.issueApiKey, {}],
        [m.rollApiKey, { id, expiresInHours: 168 }],
        [m.revokeApiKey, { id }],
      ] as const) {
        const res = await grpcUnary(t.partnerUrl, method as never, request as never, { authorization });
        expect(res.ok ? "ok" : [res.code, res.errorInfo?.reason]).toEqual([
          grpc.status.PERMISSION_DENIED,
          "permission_denied",
        ]);
      }
    }
    // Nothing changed: the same keys, the same statuses, both still working.
    expect(await keysOf(a.partnerId)).toEqual(before);
    expect(await works(a.sandboxKey)).toBe(true);
    expect(await works(a.liveKey)).toBe(true);
  });

  it("that is missing or does not work is 401 with the code every route gives, never 403, on any face", async () => {
    const c = await createPartner(t);
    await t.internal.apiKeys.revokeApiKey({ keyId: c.sandboxKeyId });
    const id = a.sandboxKeyId;
    const cases: [string, string | undefined, string][] = [
      ["no key", undefined, "unauthenticated"],
      ["a malformed key", "Bearer sk_sandbox_wrong", "unauthenticated"],
      ["an unknown key", `Bearer sk_sandbox_${"A".repeat(32)}`, "invalid_api_key"],
      ["a revoked key", `Bearer ${c.sandboxKey}`, "api_key_revoked"],
    ];
    const m = ApiKeyService.method;
    for (const [name, authorization, expected] of cases) {
      const headers: Record<string, string> = authorization ? { authorization } : {};
      // REST: every answer is also checked against the OpenAPI document, which lists these 401s.
      for (const [method, path, body] of apiKeyRoutes(id)) {
        const res = await rest(t.partnerUrl, method, path, { body, headers });
        expect([res.status, res.body.code], `${name}: ${method} ${path}`).toEqual([401, expected]);
      }
      for (const client of [
        connectClient(ApiKeyService, t.partnerUrl, authorization),
        grpcWebClient(ApiKeyService, t.partnerUrl, authorization),
      ]) {
        expect(await code(client.listApiKeys({})), name).toBe(expected);
        expect(await code(client.issueApiKey({})), name).toBe(expected);
        expect(await code(client.rollApiKey({ id })), name).toBe(expected);
        expect(await code(client.revokeApiKey({ id })), name).toBe(expected);
      }
      for (const [method, request] of [
        [m.listApiKeys, {}],
        [m.issueApiKey, {}],
        [m.rollApiKey, { id }],
        [m.revokeApiKey, { id }],
      ] as const) {
        const res = await grpcUnary(t.partnerUrl, method as never, request as never, headers);
        expect(res.ok ? "ok" : [res.code, res.errorInfo?.reason], name).toEqual([
          grpc.status.UNAUTHENTICATED,
          expected,
        ]);
      }
    }
    expect(await works(a.sandboxKey)).toBe(true);
  });

  it("cannot replay a session's idempotency key to get the key the session rolled", async () => {
    const c = await createPartner(t);
    const adminC = await member(t, clock, c.partnerId, "admin");
    const path = `/partner/v1/api-keys/${c.sandboxKeyId}/roll`;
    const session = {
      cookie: adminC.browser.cookie ?? "",
      origin: t.partnerUrl,
      "connect-protocol-version": "1",
      "x-portal-environment": "sandbox",
      "idempotency-key": "roll-1",
    };
    const rolled = await rest(t.partnerUrl, "POST", path, { body: { expiresInHours: 24 }, headers: session });
    expect(rolled.status).toBe(200);
    const secret = rolled.body.key as string;
    expect(secret).toBeTruthy();
    // The old key, which still works for its overlap, sends the same idempotency key: refused, no secret.
    const replay = await rest(t.partnerUrl, "POST", path, {
      key: c.sandboxKey,
      body: { expiresInHours: 24 },
      headers: { "idempotency-key": "roll-1" },
    });
    expect(replay.status).toBe(403);
    expect(replay.body.code).toBe("permission_denied");
    expect(JSON.stringify(replay.body)).not.toContain(secret);
    // The session's own retry is still answered from the record.
    const again = await rest(t.partnerUrl, "POST", path, { body: { expiresInHours: 24 }, headers: session });
    expect(again.status).toBe(200);
    expect(again.body.key).toBe(secret);
  });

  it("wins over a session cookie sent beside it: the call is the key's, and refused", async () => {
    const res = await fetch(`${t.partnerUrl}/partner.v1.ApiKeyService/IssueApiKey`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "connect-protocol-version": "1",
        origin: t.partnerUrl,
        authorization: `Bearer ${a.sandboxKey}`,
        cookie: devA.browser.cookie ?? "",
        "x-portal-environment": "production",
      },
      body: "{}",
    });
    expect(res.status).toBe(403);
    expect((await res.json()).code).toBe("permission_denied");
  });
});

describe("a portal session", () => {
  it("of partner A never sees or touches partner B's keys", async () => {
    const keys = devA.browser.client(ApiKeyService);
    const seen = (await keys.listApiKeys({})).apiKeys.map((k) => k.id);
    expect(seen).not.toContain(b.sandboxKeyId);
    expect(seen).not.toContain(b.liveKeyId);
    expect(await code(keys.rollApiKey({ id: b.sandboxKeyId }))).toBe("not_found");
    expect(await code(keys.revokeApiKey({ id: b.sandboxKeyId }))).toBe("not_found");
    expect(await code(keys.revokeApiKey({ id: "key_00000000000000000000000000" }))).toBe("not_found");
    expect(await works(b.sandboxKey)).toBe(true);
    expect((await keysOf(b.partnerId)).every(([, s]) => s === ApiKey_Status.ACTIVE)).toBe(true);
  });

  it("never sees or touches the other environment's keys", async () => {
    const keys = devA.browser.client(ApiKeyService);
    expect((await keys.listApiKeys({})).apiKeys.map((k) => k.id)).toEqual([a.sandboxKeyId]);
    expect(await code(keys.rollApiKey({ id: a.liveKeyId }))).toBe("not_found");
    expect(await code(keys.revokeApiKey({ id: a.liveKeyId }))).toBe("not_found");
    expect(await works(a.liveKey)).toBe(true);
    devA.browser.environment = "production";
    try {
      expect((await keys.listApiKeys({})).apiKeys.map((k) => k.id)).toEqual([a.liveKeyId]);
      expect(await code(keys.revokeApiKey({ id: a.sandboxKeyId }))).toBe("not_found");
    } finally {
      devA.browser.environment = "sandbox";
    }
    expect(await works(a.sandboxKey)).toBe(true);
  });

  it("of a viewer can only list", async () => {
    const viewer = await member(t, clock, a.partnerId, "viewer");
    const keys = viewer.browser.client(ApiKeyService);
    expect((await keys.listApiKeys({})).apiKeys.map((k) => k.id)).toEqual([a.sandboxKeyId]);
    expect(await code(keys.issueApiKey({}))).toBe("permission_denied");
    expect(await code(keys.rollApiKey({ id: a.sandboxKeyId, expiresInHours: 168 }))).toBe(
      "permission_denied",
    );
    expect(await code(keys.revokeApiKey({ id: a.sandboxKeyId }))).toBe("permission_denied");
    expect(await works(a.sandboxKey)).toBe(true);
  });

  it("cannot stretch a roll's overlap past 168 hours, or below 0", async () => {
    const keys = devA.browser.client(ApiKeyService);
    for (const expiresInHours of [169, -1, 2 ** 31 - 1]) {
      expect(await code(keys.rollApiKey({ id: a.sandboxKeyId, expiresInHours }))).toBe("validation_failed");
    }
    expect(await keysOf(a.partnerId)).toEqual(
      expect.arrayContaining([[a.sandboxKeyId, ApiKey_Status.ACTIVE]]),
    );
  });

  it("leaves no secret in the audit log or the logs, and every write in the audit log", async () => {
    const keys = devA.browser.client(ApiKeyService);
    const rolled = await keys.rollApiKey({ id: a.sandboxKeyId, expiresInHours: 0 });
    expect(await works(a.sandboxKey)).toBe(false);
    expect(await works(rolled.key)).toBe(true);
    await keys.revokeApiKey({ id: rolled.apiKey?.id ?? "" });
    const issued = await keys.issueApiKey({});
    const { events } = await adminA.browser.client(TeamService).listAuditEvents({ limit: 100 });
    const text = `${logs.join("\n")}\n${JSON.stringify(events, (_k, v) => (typeof v === "bigint" ? String(v) : v))}`;
    for (const secret of [rolled.key, issued.key]) expect(text).not.toContain(secret.slice(12));
    const writes = events.filter((e) => e.detail.startsWith("partner.v1.ApiKeyService/"));
    // The refused writes (B's key, the other environment's, the bad overlaps) are recorded too.
    expect(writes.filter((e) => e.outcome === "ok").map((e) => [e.detail, e.target])).toEqual([
      ["partner.v1.ApiKeyService/IssueApiKey", issued.apiKey?.id],
      ["partner.v1.ApiKeyService/RevokeApiKey", rolled.apiKey?.id],
      ["partner.v1.ApiKeyService/RollApiKey", a.sandboxKeyId],
    ]);
    expect(writes.filter((e) => e.outcome === "not_found").length).toBeGreaterThanOrEqual(5);
  });
});
