import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { Code, type ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SnapshotService } from "../../gen/partner/v1/snapshots_pb.ts";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { createConsentedUser } from "../factories/users.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, grpcUnary, rest } from "../support/clients.ts";
import { sample, scrapeMetrics } from "../support/metrics.ts";
import { eventually } from "../support/wait.ts";

// What an operator's request counts and 5xx ratio see must be what partners got: a gRPC error is an HTTP 200
// on the wire, and a call its client abandons never finishes its answer.
let t: TestApp;
let p: PartnerFixture;
beforeAll(async () => {
  t = await startTestApp();
  p = await createPartner(t);
});
afterAll(() => t?.stop());

/** The `http_requests_total` sample with every one of `labels`, 0 when absent. */
async function requests(labels: Record<string, string>): Promise<number> {
  return sample(await scrapeMetrics(t), "http_requests_total", labels);
}

describe("calls as counted", () => {
  it("counts a gRPC error under the status the REST face answers for its code, not the wire's 200", async () => {
    const userId = "usr_01JAAAAAAAAAAAAAAAAAAAAAAA";
    const labels = { face: "grpc", route: "/partner.v1.SnapshotService/GetSnapshot" };
    const res = await grpcUnary(
      t.partnerUrl,
      SnapshotService.method.getSnapshot,
      { userId },
      { authorization: `Bearer ${p.sandboxKey}` },
    );
    expect(res.ok).toBe(false);
    const onRest = await rest(t.partnerUrl, "GET", `/partner/v1/users/${userId}/snapshot`, {
      key: p.sandboxKey,
    });
    expect(onRest.status).toBeGreaterThanOrEqual(400);
    await eventually(async () => (await requests({ ...labels, status: String(onRest.status) })) === 1, {
      what: `the gRPC refusal counted as ${onRest.status}`,
    });
    expect(await requests({ ...labels, status: "200" })).toBe(0);
  });

  it("counts a call its client abandons mid-body as 499, over HTTP/1.1 and HTTP/2, and keeps serving", async () => {
    const labels = { face: "rest", route: "/partner/v1/webhooks", method: "POST", status: "499" };
    const url = new URL(t.partnerUrl);
    const head =
      `POST /partner/v1/webhooks HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${p.sandboxKey}\r\n` +
      "Content-Type: application/json\r\nContent-Length: 400\r\n\r\n{";
    // Each is cut once its part is on the wire: the service sees the headers, then the connection or stream end.
    for (let i = 0; i < 20; i++) {
      const socket = net.connect(Number(url.port), url.hostname);
      socket.on("error", () => undefined);
      socket.write(head, () => socket.destroy());
    }
    const session = http2.connect(t.partnerUrl);
    session.on("error", () => undefined);
    for (let i = 0; i < 20; i++) {
      const stream = session.request({
        ":method": "POST",
        ":path": "/partner/v1/webhooks",
        authorization: `Bearer ${p.sandboxKey}`,
        "content-type": "application/json",
      });
      stream.on("error", () => undefined);
      stream.write("{", () => stream.close(http2.constants.NGHTTP2_CANCEL));
    }
    await eventually(async () => (await requests(labels)) === 40, { what: "40 abandoned calls counted" });
    session.close();
    const ok = await fetch(`${t.partnerUrl}/partner/v1/keys`, {
      headers: { authorization: `Bearer ${p.sandboxKey}` },
    });
    expect(ok.status).toBe(200);
  });

  it("labels a Connect not-found by its procedure, and the API's documents by their paths", async () => {
    const missing = await connectClient(WebhookService, t.partnerUrl, `Bearer ${p.sandboxKey}`)
      .getWebhook({ id: "whk_01JAAAAAAAAAAAAAAAAAAAAAAA" })
      .catch((e: unknown) => e);
    expect((missing as ConnectError).code).toBe(Code.NotFound);
    const unknown = await fetch(`${t.partnerUrl}/partner.v1.WebhookService/NoSuchMethod`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${p.sandboxKey}` },
      body: "{}",
    });
    expect(unknown.status).toBe(404);
    expect((await fetch(`${t.partnerUrl}/partner/v1/openapi.json`)).status).toBe(200);
    await eventually(
      async () =>
        (await requests({
          face: "connect",
          route: "/partner.v1.WebhookService/GetWebhook",
          status: "404",
        })) === 1 &&
        (await requests({ face: "http", route: "/partner/v1/openapi.json", status: "200" })) === 1,
      { what: "the not-found under its procedure, the document under its path" },
    );
    // A procedure no service has stays out of the labels.
    expect(await requests({ route: "/partner.v1.WebhookService/NoSuchMethod" })).toBe(0);
  });

  it("times the snapshots served, from their arrival whole: no refusal and no trickled body is in it", async () => {
    const { userId } = await createConsentedUser(t, p.partnerId);
    const served = async (face: string) =>
      sample(await scrapeMetrics(t), "snapshot_read_duration_seconds_count", { face });
    const ok = await rest(t.partnerUrl, "GET", `/partner/v1/users/${userId}/snapshot`, { key: p.sandboxKey });
    expect(ok.status).toBe(200);
    const refused = await rest(
      t.partnerUrl,
      "GET",
      "/partner/v1/users/usr_01JBBBBBBBBBBBBBBBBBBBBBBB/snapshot",
      {
        key: p.sandboxKey,
      },
    );
    expect(refused.status).toBe(403);
    await eventually(async () => (await served("rest")) === 1, { what: "one REST snapshot timed" });

    // A Connect read whose body arrives over 600 ms: served, and timed from its last byte.
    const body = Buffer.from(JSON.stringify({ userId }));
    const url = new URL(t.partnerUrl);
    const answer = await new Promise<{ status: number; ms: number }>((resolve, reject) => {
      const started = performance.now();
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          method: "POST",
          path: "/partner.v1.SnapshotService/GetSnapshot",
          headers: {
            authorization: `Bearer ${p.sandboxKey}`,
            "content-type": "application/json",
            "content-length": body.length,
          },
        },
        (res) =>
          res
            .resume()
            .on("end", () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started })),
      );
      req.on("error", reject);
      req.write(body.subarray(0, 5));
      setTimeout(() => req.end(body.subarray(5)), 600);
    });
    expect(answer.status).toBe(200);
    expect(answer.ms).toBeGreaterThanOrEqual(600);
    await eventually(async () => (await served("connect")) === 1, { what: "the Connect snapshot timed" });
    const sum = sample(await scrapeMetrics(t), "snapshot_read_duration_seconds_sum", { face: "connect" });
    // The 600 ms the client took to send its body are the client's, not the read's: the read is timed from its
    // last byte, sent no sooner than 600 ms after the call began.
    expect(sum * 1000).toBeLessThanOrEqual(answer.ms - 600 + 1);
  });
});
