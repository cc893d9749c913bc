import { Code, ConnectError } from "@connectrpc/connect";
import { encodeTime } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { sql } from "../../src/platform/db/sql.ts";
import { requestLogRepository } from "../../src/requestlog/request-log.repository.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, grpcUnary, rest } from "../support/clients.ts";

// U+0000 is valid JSON, protobuf and URL text, and PostgreSQL stores it in no text or jsonb: a partner who sends
// it must be told so (422), never answered 503 as if the database were away, and must fail no one else's write.
let t: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
});
afterAll(() => t?.stop());

const NUL_TEXT = "must not contain the NUL character (U+0000)";

describe("a NUL character in a request", () => {
  it("is refused as 422 validation_failed, naming the field, on REST, Connect and gRPC", async () => {
    const created = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: p.sandboxKey,
      body: { url: "http://127.0.0.1:9/nul", events: ["*"], description: "x\u0000y" },
    });
    expect(created.status).toBe(422);
    expect(created.body).toMatchObject({
      code: "validation_failed",
      details: { fields: { description: NUL_TEXT } },
    });

    const ok = await rest(t.partnerUrl, "POST", "/partner/v1/webhooks", {
      key: p.sandboxKey,
      body: { url: "http://127.0.0.1:9/nul", events: ["*"] },
    });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const patched = await rest(t.partnerUrl, "PATCH", `/partner/v1/webhooks/${ok.body.id}`, {
      key: p.sandboxKey,
      body: { description: "a\u0000" },
    });
    expect(patched.status).toBe(422);

    // In a path: the id field holds it.
    const byPath = await rest(t.partnerUrl, "GET", "/partner/v1/consents/%00", { key: p.sandboxKey });
    expect(byPath.status).toBe(422);
    expect(byPath.body.details.fields).toEqual({ id: NUL_TEXT });

    const connect = await connectClient(WebhookService, t.partnerUrl, `Bearer ${p.sandboxKey}`)
      .createWebhook({ url: "http://127.0.0.1:9/nul", events: ["*"], description: "\u0000" })
      .catch((e: unknown) => e);
    expect(connect).toBeInstanceOf(ConnectError);
    expect((connect as ConnectError).code).toBe(Code.InvalidArgument);

    const grpc = await grpcUnary(
      t.partnerUrl,
      WebhookService.method.createWebhook,
      { url: "http://127.0.0.1:9/nul", events: ["*"], description: "\u0000" },
      { authorization: `Bearer ${p.sandboxKey}` },
    );
    expect(grpc.ok).toBe(false);
    expect(grpc.ok ? 0 : grpc.code).toBe(Code.InvalidArgument);
    // Nothing was stored but the one valid subscription.
    const [{ n }] = (await sql(
      t.app.orm.em.fork(),
      "select count(*)::int as n from webhooks where partner_id = $1",
      [p.partnerId],
    )) as [{ n: number }];
    expect(n).toBe(1);
  });

  it("in a logged call's error fails no other call's line of the request log", async () => {
    const call = (id: string, error: string | null) => ({
      id,
      partnerId: p.partnerId,
      environment: "sandbox",
      apiKeyId: p.sandboxKeyId,
      method: "GET",
      route: "/partner/v1/keys",
      face: "rest",
      status: error ? 400 : 200,
      errorCode: error ? "invalid_request" : null,
      durationUs: 100,
      error,
    });
    const now = encodeTime(Date.now(), 10);
    const [a, b] = [`req_${now}${"A".repeat(16)}`, `req_${now}${"B".repeat(16)}`];
    // An error body whose text holds U+0000 (JSON's `\u0000`) and a literal backslash-u text beside it.
    const body = JSON.stringify({ code: "invalid_request", message: "bad \u0000 and \\u0000 kept" });
    await requestLogRepository.insert(t.app.orm.em.fork(), [call(a, body), call(b, null)]);
    const rows = await sql<{ id: string; error: { message: string } | null }>(
      t.app.orm.em.fork(),
      "select id, error from request_log where id = any($1) order by id",
      [[a, b]],
    );
    expect(rows.map((r) => r.id)).toEqual([a, b]);
    expect(rows[0]?.error?.message).toBe("bad \uFFFD and \\u0000 kept");
  });
});
