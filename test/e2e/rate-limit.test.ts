import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { createPartner, type PartnerFixture } from "../factories/partners.ts";
import { startAnotherInstance, startTestApp, type TestApp } from "../support/app.ts";
import { grpcUnary, rest } from "../support/clients.ts";

// A bucket of 5 that practically never refills, so the test counts tokens, not milliseconds.
const tiny = {
  read: { capacity: 5, refillPerSecond: 0.001 },
  write: { capacity: 5, refillPerSecond: 0.001 },
};

let a: TestApp;
let b: TestApp;
let partner: PartnerFixture;

beforeAll(async () => {
  a = await startTestApp({ config: { rateLimits: tiny } });
  // A second instance of the service on the same database, as in a scaled-out deployment.
  b = await startAnotherInstance(a, { config: { rateLimits: tiny } });
  partner = await createPartner(a);
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

describe("per-key rate limits", () => {
  it("shares one bucket between instances and answers 429 with Retry-After and RateLimit headers", async () => {
    const statuses: number[] = [];
    const responses = [];
    for (let i = 0; i < 10; i++) {
      const instance = i % 2 === 0 ? a : b;
      const res = await rest(instance.partnerUrl, "GET", "/partner/v1/keys", { key: partner.sandboxKey });
      statuses.push(res.status);
      responses.push(res);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.slice(5)).toEqual([429, 429, 429, 429, 429]);

    const ok = responses[0];
    expect(ok?.headers.get("ratelimit-policy")).toBe('"read";q=5;w=5000');
    expect(ok?.headers.get("ratelimit")).toMatch(/^"read";r=\d+;t=\d+$/);

    const limited = responses[9];
    expect(limited?.body).toMatchObject({ code: "rate_limited", requestId: expect.stringMatching(/^req_/) });
    expect(Number(limited?.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(limited?.headers.get("ratelimit")).toMatch(/^"read";r=0;t=\d+$/);
    expect(limited?.headers.get("ratelimit-policy")).toBe('"read";q=5;w=5000');
  });

  it("reports the same limit over gRPC, with retry-after metadata", async () => {
    const res = await grpcUnary(
      b.partnerUrl,
      KeysService.method.listKeys,
      {},
      { authorization: `Bearer ${partner.sandboxKey}` },
    );
    if (res.ok) throw new Error("expected the bucket to be empty");
    expect(res.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(res.errorInfo?.reason).toBe("rate_limited");
    expect(Number(res.metadata.get("retry-after")[0])).toBeGreaterThanOrEqual(1);
  });

  it("keeps each key's bucket to itself", async () => {
    const live = await rest(a.partnerUrl, "GET", "/partner/v1/keys", { key: partner.liveKey });
    expect(live.status).toBe(200);
  });
});
