import http from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { addressAllowed, localAllowed, parseDestination, vetHost } from "../../src/webhooks/destination.ts";
import { createSender } from "../../src/webhooks/sender.ts";

describe("webhook destinations", () => {
  it("refuses private, loopback, link-local, CGNAT, multicast and reserved addresses", () => {
    for (const ip of [
      "127.0.0.1",
      "10.0.0.1",
      "172.16.5.4",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "224.0.0.1",
      "255.255.255.255",
      "::1",
      "::",
      "fe80::1",
      "fd00::1",
      "ff02::1",
      "::ffff:10.0.0.1",
      "::ffff:127.0.0.1",
      "::ffff:a00:1",
      "64:ff9b::10.0.0.1",
    ]) {
      expect(addressAllowed(ip, false), ip).toBe(false);
    }
  });

  it("refuses IPv4 hidden in every IPv6 embedding, and IPv6 outside global unicast", () => {
    for (const ip of [
      "::7f00:1",
      "::127.0.0.1",
      "::ffff:0:7f00:1",
      "::ffff:0:10.0.0.1",
      "64:ff9b::7f00:1",
      "64:ff9b:1::5db8:d822",
      "2002:7f00:1::",
      "2002:a9fe:a9fe::1",
      "4000::1",
      "::",
    ]) {
      expect(addressAllowed(ip, false), ip).toBe(false);
      // Local development allows loopback however it is written; nothing else of these.
      if (!/7f00:1|127\.0\.0\.1/.test(ip)) expect(addressAllowed(ip, true), `${ip} (local)`).toBe(false);
    }
  });

  it("allows public addresses, and loopback only in local development", () => {
    for (const ip of [
      "93.184.216.34",
      "8.8.8.8",
      "2606:4700::1111",
      "::ffff:93.184.216.34",
      "2002:5db8:d822::1",
      "64:ff9b::5db8:d822",
    ]) {
      expect(addressAllowed(ip, false), ip).toBe(true);
    }
    expect(addressAllowed("127.0.0.1", true)).toBe(true);
    expect(addressAllowed("::1", true)).toBe(true);
    expect(addressAllowed("10.0.0.1", true)).toBe(false);
  });

  it("requires https (http only in local development) and no credentials", () => {
    expect(() => parseDestination("http://example.com/hook", false)).toThrow(/https/);
    expect(parseDestination("http://127.0.0.1:9/hook", true).port).toBe("9");
    expect(() => parseDestination("https://user:pw@example.com/", false)).toThrow(/credentials/);
    expect(() => parseDestination("not a url", false)).toThrow();
    expect(() => parseDestination(`https://example.com/${"a".repeat(2100)}`, false)).toThrow(/2048/);
  });

  it("refuses a host when any of its addresses is forbidden", async () => {
    const resolver = async () => [
      { address: "93.184.216.34", family: 4 as const },
      { address: "10.0.0.1", family: 4 as const },
    ];
    await expect(vetHost("mixed.example", { allowLocal: false, resolver })).rejects.toMatchObject({
      problem: "destination_not_allowed",
    });
    await expect(
      vetHost("gone.example", {
        allowLocal: false,
        resolver: async () => {
          throw Object.assign(new Error("nope"), { code: "ENOTFOUND" });
        },
      }),
    ).rejects.toMatchObject({ problem: "dns_error" });
    expect(await vetHost("[2606:4700::1111]", { allowLocal: false, resolver })).toEqual({
      address: "2606:4700::1111",
      family: 6,
    });
  });

  it("never vets a port of the service's own listeners on loopback, even with local destinations allowed", async () => {
    const policy = {
      allowLocal: true,
      ownPorts: new Set([8080, 9090]),
      resolver: async () => [{ address: "127.0.0.1", family: 4 as const }],
    };
    for (const [host, port] of [
      ["127.0.0.1", 8080],
      ["localhost", 9090],
      ["[::1]", 8080],
      ["[::ffff:127.0.0.1]", 9090],
    ] as const)
      await expect(vetHost(host, policy, port), `${host}:${port}`).rejects.toThrow(/not allowed/);
    await expect(vetHost("127.0.0.1", policy, 8081)).resolves.toEqual({ address: "127.0.0.1", family: 4 });
    // A public address on the same port number is someone else's server.
    await expect(vetHost("1.1.1.1", policy, 8080)).resolves.toEqual({ address: "1.1.1.1", family: 4 });
  });

  it("allows local destinations for sandbox subscriptions only, and only with the switch", async () => {
    const loopback = async () => [{ address: "127.0.0.1", family: 4 as const }];
    const on = { allowLocal: true, resolver: loopback };
    expect(localAllowed(on, "sandbox")).toBe(true);
    expect(localAllowed(on, "production")).toBe(false);
    expect(localAllowed({ ...on, allowLocal: false }, "sandbox")).toBe(false);
    // Tests only: production too, but never without the switch.
    expect(localAllowed({ ...on, allowLocalInProduction: true }, "production")).toBe(true);
    expect(localAllowed({ ...on, allowLocal: false, allowLocalInProduction: true }, "production")).toBe(
      false,
    );
    await expect(vetHost("localhost", on, 8081, "sandbox")).resolves.toEqual({
      address: "127.0.0.1",
      family: 4,
    });
    // Said without what the name resolved to.
    await expect(vetHost("localhost", on, 8081, "production")).rejects.toThrow(
      /^localhost is not a public address, so it is not allowed$/,
    );
    await expect(vetHost("[::1]", on, 8081, "production")).rejects.toMatchObject({
      problem: "destination_not_allowed",
    });
  });

  it("refuses at send time a production delivery to loopback, before any connection", async () => {
    let requests = 0;
    const server = http.createServer((_req, res) => {
      requests++;
      res.end("ok");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    const sender = createSender({
      policy: { allowLocal: true, resolver: async () => [] },
      connectTimeoutMs: 1_000,
      timeoutMs: 2_000,
    });
    try {
      expect(await sender.post(url, "{}", {}, "production")).toMatchObject({
        ok: false,
        error: "destination_not_allowed",
      });
      expect(requests).toBe(0);
      expect(await sender.post(url, "{}", {}, "sandbox")).toMatchObject({ ok: true, statusCode: 200 });
      expect(requests).toBe(1);
    } finally {
      sender.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
