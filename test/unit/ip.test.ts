import { describe, expect, it } from "vitest";
import { addressKey } from "../../src/platform/ip.ts";

describe("addressKey", () => {
  it("keeps an IPv4 address, also when it arrives IPv4-mapped", () => {
    expect(addressKey("203.0.113.7")).toBe("203.0.113.7");
    expect(addressKey("::ffff:203.0.113.7")).toBe("203.0.113.7");
    expect(addressKey("::ffff:cb00:7107")).toBe("203.0.113.7");
  });

  it("counts an IPv6 address by its /64, however it is written", () => {
    const key = addressKey("2001:db8:1:2:aaaa:bbbb:cccc:dddd");
    expect(key).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:0db8:0001:0002::1")).toBe(key);
    expect(addressKey("2001:db8:1:2:ffff::%eth0")).toBe(key);
    expect(addressKey("2001:db8:1:3::1")).not.toBe(key);
    expect(addressKey("::1")).toBe("0:0:0:0::/64");
  });

  it("keeps what is not an address as it is", () => {
    expect(addressKey("")).toBe("");
    expect(addressKey("not-an-ip")).toBe("not-an-ip");
  });
});
