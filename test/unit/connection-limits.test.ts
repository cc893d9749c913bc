import { describe, expect, it } from "vitest";
import { createConnectionLimits } from "../../src/platform/http/connection-limits.ts";

/** Admits a connection from `address` and expects it counted; returns what uncounts it. */
function admitted(limits: ReturnType<typeof createConnectionLimits>, address: string): () => void {
  const release = limits.admit(address);
  if (typeof release === "string") throw new Error(`${address} refused: ${release}`);
  return release;
}

describe("connection limits", () => {
  it("count an IPv6 client by its /64: its other addresses share the cap, the next /64 has its own", () => {
    const limits = createConnectionLimits({ max: 100, maxPerAddress: 2 });
    admitted(limits, "2001:db8:1:2::1");
    admitted(limits, "2001:db8:1:2:ffff:ffff:ffff:ffff");
    expect(limits.admit("2001:0db8:0001:0002:0:0:0:9")).toBe("address_limit");
    admitted(limits, "2001:db8:1:3::1");
    expect(limits.addresses).toBe(2);
    expect(limits.open).toBe(3);
  });

  it("count an IPv4-mapped client as the IPv4 address it is", () => {
    const limits = createConnectionLimits({ max: 100, maxPerAddress: 1 });
    admitted(limits, "203.0.113.7");
    expect(limits.admit("::ffff:203.0.113.7")).toBe("address_limit");
    admitted(limits, "203.0.113.8");
  });

  it("refuse past the listener's cap whatever the address, and admit again once one closes", () => {
    const limits = createConnectionLimits({ max: 2, maxPerAddress: 5 });
    const first = admitted(limits, "198.51.100.1");
    admitted(limits, "198.51.100.2");
    expect(limits.admit("198.51.100.3")).toBe("listener_limit");
    first();
    admitted(limits, "198.51.100.3");
  });

  it("say an address at its cap is refused for its address, even when the listener is full too", () => {
    const limits = createConnectionLimits({ max: 2, maxPerAddress: 1 });
    admitted(limits, "198.51.100.1");
    admitted(limits, "198.51.100.2");
    expect(limits.admit("198.51.100.1")).toBe("address_limit");
    expect(limits.admit("198.51.100.3")).toBe("listener_limit");
  });

  it("keep no entry for an address once its last connection closes, and uncount each connection once", () => {
    const limits = createConnectionLimits({ max: 10, maxPerAddress: 3 });
    const releases = Array.from({ length: 3 }, () => admitted(limits, "2001:db8::1"));
    for (const release of releases) {
      release();
      release();
    }
    expect(limits.open).toBe(0);
    expect(limits.addresses).toBe(0);
    admitted(limits, "2001:db8::2");
    expect(limits.open).toBe(1);
  });

  it("with no cap per address (behind a load balancer), count only the total and keep no addresses", () => {
    const limits = createConnectionLimits({ max: 3, maxPerAddress: 0 });
    const releases = Array.from({ length: 3 }, () => admitted(limits, "10.0.0.1"));
    expect(limits.admit("10.0.0.1")).toBe("listener_limit");
    expect(limits.addresses).toBe(0);
    releases[0]?.();
    releases[0]?.();
    expect(limits.open).toBe(2);
  });
});
