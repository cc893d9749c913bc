import http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KeysService } from "../../gen/partner/v1/keys_pb.ts";
import { ADDRESS_LIMITS, createAddressGuard } from "../../src/ratelimit/limiters.service.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { connectClient, errorInfoOf, grpcWebClient } from "../support/clients.ts";

// docs/rate-limits.md, "Without a key: per client address": an address that fails to authenticate 100 times is
// refused 429 rate_limited on every API request until its bucket refills (10 a second), and guesses sent all
// at once are held to what the bucket has. Over gRPC and Connect the refusal is resource_exhausted with a
// google.rpc.ErrorInfo whose reason is the code, and retry-after metadata
// (docs/idempotency-and-errors.md, docs/rate-limits.md). gRPC answers every call HTTP 200, its outcome in
// grpc-status: its refused credentials count as REST's 401s do.
let t: TestApp;
// The buckets refill on this clock, which only the tests move (as in address-limits.test.ts): on the wall
// clock, what comes back while a burst is sent would depend on how fast the machine answers.
let guardNow = 0;
beforeAll(async () => {
  t = await startTestApp();
  Object.assign(t.app.services.addressGuard, createAddressGuard({ ...ADDRESS_LIMITS, now: () => guardNow }));
});
afterAll(() => t?.stop());

const guess = (n: number, digit: string) => `sk_live_${String(n).padStart(32, digit)}`;
const tally = (xs: string[]) =>
  xs.reduce<Record<string, number>>((m, x) => {
    m[x] = (m[x] ?? 0) + 1;
    return m;
  }, {});

/** One gRPC call (HTTP/2 prior knowledge, an empty ListKeysRequest) on `session`: `http status/grpc-status`. */
function grpcGuess(session: http2.ClientHttp2Session, key: string): Promise<string> {
  return new Promise((resolve) => {
    const req = session.request({
      ":method": "POST",
      ":path": "/partner.v1.KeysService/ListKeys",
      "content-type": "application/grpc",
      te: "trailers",
      authorization: `Bearer ${key}`,
    });
    let status = "";
    let grpcStatus = "";
    req.on("response", (h) => {
      status = String(h[":status"]);
      grpcStatus = String(h["grpc-status"] ?? "");
    });
    req.on("trailers", (h) => {
      grpcStatus = String(h["grpc-status"] ?? grpcStatus);
    });
    req.on("data", () => {});
    req.on("end", () => resolve(`${status}/${grpcStatus}`));
    req.on("error", (e) => resolve(`error ${e.message}`));
    req.end(Buffer.from([0, 0, 0, 0, 0]));
  });
}

describe("the per-address limit on failed authentication", () => {
  it("holds gRPC guesses over HTTP/2 as it holds REST ones", async () => {
    const burst = ADDRESS_LIMITS.failures.capacity;
    const session = http2.connect(t.partnerUrl);
    try {
      // Three times the bucket, all at once, over one HTTP/2 connection from one address.
      const outcomes = await Promise.all(
        Array.from({ length: burst * 3 }, (_, i) => grpcGuess(session, guess(i, "0"))),
      );
      const counts = tally(outcomes);
      // 16 is UNAUTHENTICATED (the key was weighed), 8 RESOURCE_EXHAUSTED (refused by the address's bucket).
      // At most the bucket (and what refills meanwhile) may be weighed.
      expect(counts["200/16"] ?? 0, JSON.stringify(counts)).toBeLessThanOrEqual(burst + 20);
      expect(counts["200/8"] ?? 0, JSON.stringify(counts)).toBeGreaterThan(0);
      // The address is over its budget: a REST guess right after is refused too.
      const rest = await fetch(`${t.partnerUrl}/partner/v1/keys`, {
        headers: { authorization: `Bearer ${guess(1, "7")}` },
      });
      await rest.arrayBuffer();
      expect(rest.status).toBe(429);
    } finally {
      session.close();
    }
  });

  it("once an address is over its budget from REST, refuses its gRPC guesses too", async () => {
    // The bucket refills from the test above.
    guardNow += 11_000;
    const rest = await Promise.all(
      Array.from({ length: ADDRESS_LIMITS.failures.capacity + 50 }, async (_, i) => {
        const res = await fetch(`${t.partnerUrl}/partner/v1/keys`, {
          headers: { authorization: `Bearer ${guess(i, "3")}` },
        });
        await res.arrayBuffer();
        return res.status;
      }),
    );
    expect(rest).toContain(429);
    const session = http2.connect(t.partnerUrl);
    try {
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, (_, i) => grpcGuess(session, guess(i, "4"))),
      );
      // Every one should be refused (RESOURCE_EXHAUSTED); none weighed.
      expect(tally(outcomes)).toEqual({ "200/8": 50 });
    } finally {
      session.close();
    }
  }, 30_000);

  it("is refused on Connect and gRPC-Web as resource_exhausted with ErrorInfo rate_limited, not a REST body", async () => {
    guardNow += 11_000;
    await Promise.all(
      Array.from({ length: ADDRESS_LIMITS.failures.capacity + 50 }, async (_, i) => {
        const res = await fetch(`${t.partnerUrl}/partner/v1/keys`, {
          headers: { authorization: `Bearer ${guess(i, "5")}` },
        });
        await res.arrayBuffer();
      }),
    );
    const key = `Bearer ${guess(1, "8")}`;
    for (const client of [
      connectClient(KeysService, t.partnerUrl, key),
      grpcWebClient(KeysService, t.partnerUrl, key),
    ]) {
      // Keep the address over its budget (a few REST guesses alongside each call), and look at the refusals.
      const refusals: unknown[] = [];
      for (let i = 0; i < 10; i++) {
        const [, got] = await Promise.all([
          Promise.all(
            Array.from({ length: 20 }, async (_, j) => {
              const res = await fetch(`${t.partnerUrl}/partner/v1/keys`, {
                headers: { authorization: `Bearer ${guess(i * 100 + j, "6")}` },
              });
              await res.arrayBuffer();
            }),
          ),
          client.listKeys({}).then(
            () => "ok",
            (err) => {
              const e = ConnectError.from(err);
              return [Code[e.code], errorInfoOf(err)?.reason, e.metadata.get("retry-after") !== null];
            },
          ),
        ]);
        if (Array.isArray(got) && got[0] !== "Unauthenticated") refusals.push(got);
      }
      expect(refusals.length).toBeGreaterThan(0);
      for (const got of refusals) expect(got).toEqual(["ResourceExhausted", "rate_limited", true]);
    }
  }, 30_000);
});
