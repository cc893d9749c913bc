import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, grpcUnary, grpcWebClient, rest } from "../support/clients.ts";

let t: TestApp;
let partner: PartnerFixture;

beforeAll(async () => {
  t = await startTestApp();
  partner = await createPartner(t);
});
afterAll(() => t?.stop());

describe("GET /partner/v1/keys", () => {
  it("serves the caller's environment's keys identically over REST, Connect, gRPC-Web and gRPC", async () => {
    const viaRest = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: partner.sandboxKey });
    expect(viaRest.status).toBe(200);
    // The caller's own for four hours; never a shared cache's (the same URL answers each environment its keys).
    expect(viaRest.headers.get("cache-control")).toBe("private, max-age=14400");
    expect(viaRest.headers.get("vary")).toBe("authorization, x-portal-environment");
    expect(viaRest.headers.get("x-request-id")).toMatch(/^req_[0-9A-Z]{26}$/);
    const keys = viaRest.body.keys;
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({
      alg: "Ed25519",
      environment: "sandbox",
      sandbox: true,
      status: "ACTIVE",
      jwk: { kty: "OKP", crv: "Ed25519", x: keys[0].publicKey },
    });
    expect(Buffer.from(keys[0].publicKey, "base64url")).toHaveLength(32);

    const viaConnect = await connectClient(
      KeysService,
      t.partnerUrl,
      `Bearer ${partner.sandboxKey}`,
    ).listKeys({});
    expect(viaConnect.keys.map((k) => [k.kid, k.publicKey])).toEqual(
      keys.map((k: any) => [k.kid, k.publicKey]),
    );

    const viaGrpcWeb = await grpcWebClient(
      KeysService,
      t.partnerUrl,
      `Bearer ${partner.sandboxKey}`,
    ).listKeys({});
    expect(viaGrpcWeb.keys.map((k) => k.kid)).toEqual(keys.map((k: any) => k.kid));

    const viaGrpc = await grpcUnary(
      t.partnerUrl,
      KeysService.method.listKeys,
      {},
      { authorization: `Bearer ${partner.sandboxKey}` },
    );
    if (!viaGrpc.ok) throw new Error(`gRPC call failed: ${viaGrpc.details}`);
    expect(viaGrpc.message.keys.map((k) => [k.kid, k.publicKey, k.sandbox])).toEqual(
      keys.map((k: any) => [k.kid, k.publicKey, true]),
    );
    expect(String(viaGrpc.metadata.get("x-request-id")[0])).toMatch(/^req_/);
  });

  it("shows a live key only the production keys", async () => {
    const sandbox = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: partner.sandboxKey });
    const live = await rest(t.partnerUrl, "GET", "/partner/v1/keys", { key: partner.liveKey });
    expect(live.status).toBe(200);
    expect(live.body.keys.length).toBeGreaterThan(0);
    for (const k of live.body.keys) {
      expect(k.environment).toBe("production");
      expect(k.sandbox).toBe(false);
    }
    const sandboxKids = new Set(sandbox.body.keys.map((k: any) => k.kid));
    expect(live.body.keys.some((k: any) => sandboxKids.has(k.kid))).toBe(false);
  });

  /** Asks a listener's gRPC reflection service to list its services; returns the raw replies as text. */
  async function listServices(baseUrl: string, authorization?: string): Promise<string> {
    const client = new grpc.Client(new URL(baseUrl).host, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    if (authorization) md.set("authorization", authorization);
    const call = client.makeBidiStreamRequest(
      "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
      (b: Buffer) => b,
      (b: Buffer) => b,
      md,
    );
    const replies: Buffer[] = [];
    const done = new Promise<void>((resolve, reject) => {
      call.on("data", (b: Buffer) => replies.push(b));
      call.on("end", resolve);
      call.on("error", reject);
    });
    // ServerReflectionRequest { list_services (field 7) = "" }
    call.write(Buffer.from([0x3a, 0x00]));
    call.end();
    try {
      await done;
    } finally {
      client.close();
    }
    return replies.map((r) => r.toString("latin1")).join("");
  }

  it("answers gRPC server reflection on the partner port without a key, listing only the partner API", async () => {
    const text = await listServices(t.partnerUrl);
    expect(text).toContain("partner.v1.KeysService");
    expect(text).not.toContain("internal.v1");
  });

  it("answers gRPC server reflection on the internal port with the service token only", async () => {
    const text = await listServices(t.internalUrl, `Bearer ${t.internalToken}`);
    expect(text).toContain("internal.v1.PartnerService");
    expect(text).toContain("internal.v1.ApiKeyService");
    expect(text).toContain("internal.v1.SigningKeyService");
    await expect(listServices(t.internalUrl)).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
  });
});
