import { fromBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BadRequestSchema } from "../../gen/google/rpc/error_details_pb.ts";
import { StatusSchema } from "../../gen/google/rpc/status_pb.ts";
import { PartnerService } from "../../gen/internal/v1/partners_pb.ts";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { encodeGrpcMessage } from "../../src/platform/rpc/node-adapter.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, grpcUnary } from "../support/clients.ts";

// What tools that follow the gRPC and Connect specs expect of a server (grpc-js here, a gRPC implementation
// independent of ours): an unknown method is UNIMPLEMENTED, and an error's message arrives as it was written.

let t: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
});
afterAll(() => t?.stop());

/** A method of a real service with another name: one the server does not have. */
const missing = (name: string) =>
  ({ ...KeysService.method.listKeys, name, parent: { typeName: "partner.v1.KeysService" } }) as never;

describe("over gRPC and Connect", () => {
  it("an unknown method, or an unknown service, is UNIMPLEMENTED (gRPC status 12), not an HTTP 404", async () => {
    const res = await grpcUnary(
      t.partnerUrl,
      missing("NoSuchMethod"),
      {},
      { authorization: `Bearer ${p.sandboxKey}` },
    );
    expect(res.ok).toBe(false);
    if (res.ok) return;
    expect(res.code, res.details).toBe(12);
    expect(res.details).toBe("The method /partner.v1.KeysService/NoSuchMethod does not exist.");
    const other = await grpcUnary(
      t.partnerUrl,
      {
        ...KeysService.method.listKeys,
        name: "Get",
        parent: { typeName: "partner.v9.NoSuchService" },
      } as never,
      {},
    );
    expect(other.ok === false && other.code).toBe(12);
    // gRPC-Web: the same status, in the headers of a trailers-only answer.
    const web = await fetch(`${t.partnerUrl}/partner.v1.KeysService/NoSuchMethod`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
      body: new Uint8Array(5),
    });
    expect(web.status).toBe(200);
    expect(web.headers.get("grpc-status")).toBe("12");
  });

  it("an unknown method over Connect is 404 with the protocol's `unimplemented` code", async () => {
    for (const type of ["application/json", "application/proto"]) {
      const res = await fetch(`${t.partnerUrl}/partner.v1.KeysService/NoSuchMethod`, {
        method: "POST",
        headers: { "content-type": type, authorization: `Bearer ${p.sandboxKey}` },
        body: type === "application/json" ? "{}" : new Uint8Array(),
      });
      expect(res.status, type).toBe(404);
      expect(await res.json()).toMatchObject({ code: "unimplemented" });
    }
    // A REST path is still the REST face's 404.
    const rest = await fetch(`${t.partnerUrl}/partner/v1/no-such-thing`, {
      headers: { authorization: `Bearer ${p.sandboxKey}` },
    });
    expect(rest.status).toBe(404);
    expect(await rest.json()).toMatchObject({ code: "not_found" });
  });

  it("an error's message reaches grpc-js as written: `:`, spaces and non-ASCII intact", async () => {
    const res = await grpcUnary(t.internalUrl, PartnerService.method.listPartners, {});
    expect(res.ok).toBe(false);
    if (res.ok) return;
    expect(res.code).toBe(16);
    expect(res.details).toBe("Send the service token as `Authorization: Bearer …`.");
  });

  it("field errors come as google.rpc.BadRequest too, on gRPC and Connect, naming the same fields as REST", async () => {
    const bad = { url: "http://10.0.0.1/hooks", events: ["*"] };
    const viaGrpc = await grpcUnary(t.partnerUrl, WebhookService.method.createWebhook, bad, {
      authorization: `Bearer ${p.liveKey}`,
    });
    expect(viaGrpc.ok).toBe(false);
    if (viaGrpc.ok) return;
    expect(viaGrpc.errorInfo?.reason).toBe("validation_failed");
    const status = fromBinary(StatusSchema, viaGrpc.metadata.get("grpc-status-details-bin")[0] as Buffer);
    const fromGrpc = status.details.map((d) => anyUnpack(d, BadRequestSchema)).find((d) => d !== undefined);
    expect(fromGrpc?.fieldViolations.map((v) => v.field)).toEqual(["url"]);
    expect(fromGrpc?.fieldViolations[0]?.description).toMatch(/not allowed|https/);

    const client = connectClient(WebhookService, t.partnerUrl, `Bearer ${p.liveKey}`);
    const err = await client.createWebhook(bad).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    const fromConnect = err?.findDetails(BadRequestSchema)[0];
    expect(fromConnect?.fieldViolations).toEqual(fromGrpc?.fieldViolations);
  });

  it("grpc-message is percent-encoded only outside printable ASCII, and `%` itself", () => {
    expect(encodeGrpcMessage("a: b/c 100%")).toBe("a: b/c 100%25");
    expect(encodeGrpcMessage("…\n")).toBe("%E2%80%A6%0A");
  });
});
