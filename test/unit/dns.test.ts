import dgram from "node:dgram";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDnsResolver } from "../../src/webhooks/dns.ts";

// Webhook hosts are resolved by the service's own DNS queries, each lookup ending at its deadline.
let silent: dgram.Socket;
let asked = 0;

beforeAll(async () => {
  silent = dgram.createSocket("udp4");
  silent.on("message", () => {
    asked++;
  });
  await new Promise<void>((resolve) => silent.bind(0, "127.0.0.1", resolve));
});
afterAll(() => new Promise<void>((resolve) => silent.close(() => resolve())));

describe("the webhook DNS resolver", () => {
  it("ends a lookup its name server never answers at the deadline, as ETIMEOUT", async () => {
    const resolve = createDnsResolver({ servers: [`127.0.0.1:${silent.address().port}`], timeoutMs: 300 });
    const started = performance.now();
    await expect(resolve("tarpit.example")).rejects.toMatchObject({ code: "ETIMEOUT" });
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
    expect(asked).toBeGreaterThan(0);
  });

  it("answers localhost as loopback without asking anyone", async () => {
    const before = asked;
    const resolve = createDnsResolver({ servers: [`127.0.0.1:${silent.address().port}`], timeoutMs: 300 });
    for (const name of ["localhost", "LOCALHOST.", "hooks.localhost"]) {
      expect(await resolve(name)).toEqual([
        { address: "127.0.0.1", family: 4 },
        { address: "::1", family: 6 },
      ]);
    }
    expect(asked).toBe(before);
  });
});
