import { Code, type ConnectError } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PartnerService } from "../../gen/internal/v1/partners_pb.ts";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, errorInfoOf, grpcUnary, rest } from "../support/clients.ts";

let t: TestApp;
let partner: PartnerFixture;

beforeAll(async () => {
  t = await startTestApp();
  partner = await createPartner(t);
});
afterAll(() => t?.stop());

/** Calls the keys endpoint on all three faces and returns what each said. */
async function onEveryFace(authorization: string | undefined) {
  const headers: Record<string, string> = authorization === undefined ? {} : { authorization };
  const viaRest = await fetch(`${t.partnerUrl}/partner/v1/keys`, { headers });
  const restBody = (await viaRest.json()) as { code: string; requestId: string; message: string };
  let connectErr: ConnectError | undefined;
  try {
    await connectClient(KeysService, t.partnerUrl, authorization).listKeys({});
  } catch (err) {
    connectErr = err as ConnectError;
  }
  const viaGrpc = await grpcUnary(t.partnerUrl, KeysService.method.listKeys, {}, headers);
  return { viaRest, restBody, connectErr, viaGrpc };
}

describe("API key authentication", () => {
  const cases: [string, () => string | undefined, string][] = [
    ["missing", () => undefined, "unauthenticated"],
    ["not a bearer token", () => `Basic ${Buffer.from("a:b").toString("base64")}`, "unauthenticated"],
    ["malformed", () => "Bearer sk_sandbox_short", "unauthenticated"],
    ["unknown", () => `Bearer sk_sandbox_${"A".repeat(32)}`, "invalid_api_key"],
    [
      "with the wrong environment word",
      () => `Bearer ${partner.sandboxKey.replace("sk_sandbox_", "sk_live_")}`,
      "invalid_api_key",
    ],
  ];
  for (const [name, header, code] of cases) {
    it(`answers a ${name} key with 401 ${code} and a request id on every face`, async () => {
      const { viaRest, restBody, connectErr, viaGrpc } = await onEveryFace(header());
      expect(viaRest.status).toBe(401);
      expect(restBody.code).toBe(code);
      expect(restBody.requestId).toMatch(/^req_[0-9A-Z]{26}$/);
      expect(viaRest.headers.get("x-request-id")).toBe(restBody.requestId);

      expect(connectErr?.code).toBe(Code.Unauthenticated);
      const info = errorInfoOf(connectErr);
      expect(info?.reason).toBe(code);
      expect(info?.metadata.requestId).toMatch(/^req_/);
      expect(connectErr?.metadata.get("x-request-id")).toBe(info?.metadata.requestId);

      if (viaGrpc.ok) throw new Error("gRPC call should have failed");
      expect(viaGrpc.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(viaGrpc.errorInfo?.reason).toBe(code);
      expect(viaGrpc.errorInfo?.metadata.requestId).toMatch(/^req_/);
    });
  }

  it("fails a revoked key at once with api_key_revoked, on every face", async () => {
    const p = await createPartner(t);
    const ok = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: p.sandboxKey });
    expect(ok.status).toBe(200);
    await t.internal.apiKeys.revokeApiKey({ keyId: p.sandboxKeyId });
    const { viaRest, restBody, connectErr, viaGrpc } = await onEveryFace(`Bearer ${p.sandboxKey}`);
    expect(viaRest.status).toBe(401);
    expect(restBody.code).toBe("api_key_revoked");
    expect(errorInfoOf(connectErr)?.reason).toBe("api_key_revoked");
    expect(viaGrpc.ok ? "ok" : viaGrpc.errorInfo?.reason).toBe("api_key_revoked");
    // The other environment's key is untouched.
    expect((await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: p.liveKey })).status).toBe(200);
  });

  it("keeps both keys working after a roll until the old one expires", async () => {
    const p = await createPartner(t);
    const rolled = await t.internal.apiKeys.rollApiKey({ keyId: p.sandboxKeyId, expiresInHours: 24 });
    expect(rolled.key).toMatch(/^sk_sandbox_[0-9A-Za-z]{32}$/);
    expect(rolled.oldApiKey?.status).toBe(2 /* EXPIRING */);
    for (const key of [p.sandboxKey, rolled.key]) {
      expect((await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key })).status).toBe(200);
    }
    // Rolling the old key again is refused: it is no longer the active one.
    await expect(t.internal.apiKeys.rollApiKey({ keyId: p.sandboxKeyId })).rejects.toMatchObject({
      code: Code.Aborted,
    });
    // A roll with no overlap ends the old key at once.
    const again = await t.internal.apiKeys.rollApiKey({ keyId: rolled.apiKey?.id ?? "", expiresInHours: 0 });
    const expired = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: rolled.key });
    expect(expired.status).toBe(401);
    expect(expired.body.code).toBe("api_key_expired");
    expect((await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: again.key })).status).toBe(200);
    expect((await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: p.sandboxKey })).status).toBe(200);
  });

  it("refuses a second active key in one environment", async () => {
    const p = await createPartner(t);
    await expect(
      t.internal.apiKeys.issueApiKey({ partnerId: p.partnerId, environment: "sandbox" }),
    ).rejects.toSatisfy(
      (err: ConnectError) => err.code === Code.AlreadyExists && errorInfoOf(err)?.reason === "api_key_exists",
    );
  });

  it("stores only a SHA-256 of each key", async () => {
    const p = await createPartner(t);
    const pg = (await import("pg")).default;
    const db = new pg.Client({ connectionString: t.databaseUrl });
    await db.connect();
    try {
      const dump = await db.query(
        "select row_to_json(k)::text as row from api_keys k where partner_id = $1",
        [p.partnerId],
      );
      const text = dump.rows.map((r) => r.row).join("\n");
      expect(text).not.toContain(p.sandboxKey);
      expect(text).not.toContain(p.sandboxKey.slice(12));
      expect(text).toContain(p.sandboxKey.slice(0, 12));
    } finally {
      await db.end();
    }
  });
});

describe("the partner port", () => {
  it("answers unknown paths with 404 and wrong methods with 405, with the JSON error body", async () => {
    const unknown = await rest(t.partnerUrl, "GET", "/partner/v1/nope", { key: partner.sandboxKey });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ code: "not_found", requestId: expect.stringMatching(/^req_/) });
    const wrong = await rest(t.partnerUrl, "DELETE", "/partner/v1/keys", { key: partner.sandboxKey });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("allow")).toBe("GET, HEAD");
    expect(wrong.body.code).toBe("method_not_allowed");
    const elsewhere = await rest(t.partnerUrl, "GET", "/somewhere");
    expect(elsewhere.status).toBe(404);
    expect(elsewhere.body.code).toBe("not_found");
  });

  it("rejects unknown query parameters and bodies on GET", async () => {
    const query = await rest(t.partnerUrl, "GET", "/partner/v1/keys?foo=1", { key: partner.sandboxKey });
    expect(query.status).toBe(400);
    expect(query.body.code).toBe("invalid_argument");
  });

  it("does not serve the internal services, with or without the service token", async () => {
    for (const authorization of [undefined, `Bearer ${t.internalToken}`]) {
      const viaConnect = connectClient(PartnerService, t.partnerUrl, authorization);
      await expect(viaConnect.listPartners({})).rejects.toSatisfy(
        // Not a method of this listener, as the protocol says it.
        (err: ConnectError) => err.code === Code.Unimplemented,
      );
      const viaGrpc = await grpcUnary(
        t.partnerUrl,
        PartnerService.method.listPartners,
        {},
        authorization ? { authorization } : {},
      );
      expect(viaGrpc.ok).toBe(false);
      if (!viaGrpc.ok) expect(viaGrpc.code).toBe(grpc.status.UNIMPLEMENTED);
    }
  });

  it("never takes a client's X-Request-Id as its own", async () => {
    const res = await rest(t.partnerUrl, "GET", "/partner/v1/keys", {
      key: partner.sandboxKey,
      headers: { "x-request-id": "req_01ARYZ6S41TSV4RRFFQ69G5FAV" },
    });
    expect(res.headers.get("x-request-id")).toMatch(/^req_[0-9A-Z]{26}$/);
    expect(res.headers.get("x-request-id")).not.toBe("req_01ARYZ6S41TSV4RRFFQ69G5FAV");
  });

  it("reports health and readiness", async () => {
    expect((await rest(t.partnerUrl, "GET", "/healthz")).body).toEqual({ status: "ok" });
    expect((await rest(t.partnerUrl, "GET", "/readyz")).body).toEqual({ status: "ready" });
  });
});

describe("the internal listener", () => {
  it("requires the service token on Connect and gRPC", async () => {
    for (const authorization of [
      undefined,
      "Bearer wrong-token-wrong-token-wrong",
      `Bearer ${partner.sandboxKey}`,
    ]) {
      await expect(
        connectClient(PartnerService, t.internalUrl, authorization).listPartners({}),
      ).rejects.toSatisfy(
        (err: ConnectError) =>
          err.code === Code.Unauthenticated && errorInfoOf(err)?.reason === "unauthenticated",
      );
      const viaGrpc = await grpcUnary(
        t.internalUrl,
        PartnerService.method.listPartners,
        {},
        authorization ? { authorization } : {},
      );
      expect(viaGrpc.ok ? "ok" : viaGrpc.code).toBe(grpc.status.UNAUTHENTICATED);
    }
    const ok = await grpcUnary(
      t.internalUrl,
      PartnerService.method.listPartners,
      {},
      { authorization: `Bearer ${t.internalToken}` },
    );
    expect(ok.ok).toBe(true);
  });

  it("does not serve the partner API", async () => {
    const res = await rest(t.internalUrl, "GET", "/partner/v1/keys", { key: partner.sandboxKey });
    expect(res.status).toBe(404);
  });

  it("validates operator input with clear errors", async () => {
    await expect(t.internal.partners.createPartner({ name: "", feeRateBps: 100 })).rejects.toSatisfy(
      (err: ConnectError) => errorInfoOf(err)?.reason === "validation_failed",
    );
    await expect(t.internal.partners.createPartner({ name: "X", feeRateBps: 10_001 })).rejects.toSatisfy(
      (err: ConnectError) => errorInfoOf(err)?.reason === "validation_failed",
    );
    await expect(
      t.internal.apiKeys.issueApiKey({ partnerId: partner.partnerId, environment: "staging" }),
    ).rejects.toSatisfy((err: ConnectError) => errorInfoOf(err)?.reason === "validation_failed");
    await expect(
      t.internal.apiKeys.issueApiKey({ partnerId: "ptn_nope", environment: "sandbox" }),
    ).rejects.toSatisfy((err: ConnectError) => err.code === Code.NotFound);
  });
});
