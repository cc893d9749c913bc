import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ManualClock, ms } from "../../src/platform/clock.ts";
import { createSecretBox } from "../../src/platform/crypto/secret-box.ts";
import { deviceCookie } from "../../src/portal/cookies.ts";
import { createDeviceCookies, DEVICE_COOKIE_MS } from "../../src/portal/device-cookie.ts";

describe("device cookies", () => {
  const key = randomBytes(32);
  const clock = new ManualClock("2027-03-01T10:00:00Z");
  const devices = createDeviceCookies({ box: createSecretBox(key), clock });

  it("open for the account they were issued for, naming the member and the browser", () => {
    const value = devices.issue("acct-a", "mbr_1");
    const opened = devices.open(value, "acct-a");
    expect(opened?.memberId).toBe("mbr_1");
    expect(opened?.id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    // Issued again for the same browser, the device id stays.
    expect(devices.open(devices.issue("acct-a", "mbr_1", opened?.id), "acct-a")?.id).toBe(opened?.id);
    expect(devices.open(devices.issue("acct-a", "mbr_1"), "acct-a")?.id).not.toBe(opened?.id);
  });

  it("open for no other account, altered, forged, or past their 180 days", () => {
    const value = devices.issue("acct-a", "mbr_1");
    expect(devices.open(value, "acct-b")).toBeUndefined();
    const altered = `${value.slice(0, 30)}${value[30] === "A" ? "B" : "A"}${value.slice(31)}`;
    expect(devices.open(altered, "acct-a")).toBeUndefined();
    for (const junk of [
      undefined,
      "",
      "not base64!",
      randomBytes(100).toString("base64url"),
      "A".repeat(5000),
    ])
      expect(devices.open(junk, "acct-a")).toBeUndefined();
    // Sealed under another master key: no way to make one without the service's.
    const elsewhere = createDeviceCookies({ box: createSecretBox(randomBytes(32)), clock });
    expect(devices.open(elsewhere.issue("acct-a", "mbr_1"), "acct-a")).toBeUndefined();
    const late = new ManualClock(clock.now());
    const aging = createDeviceCookies({ box: createSecretBox(key), clock: late });
    const kept = aging.issue("acct-a", "mbr_1");
    late.advance(DEVICE_COOKIE_MS - ms.second);
    expect(aging.open(kept, "acct-a")).toBeDefined();
    late.advance(ms.second);
    expect(aging.open(kept, "acct-a")).toBeUndefined();
  });

  it("survive a master key rotation while the old key is accepted", () => {
    const value = devices.issue("acct-a", "mbr_1");
    const rotated = createDeviceCookies({ box: createSecretBox(randomBytes(32), [key]), clock });
    expect(rotated.open(value, "acct-a")?.memberId).toBe("mbr_1");
  });

  it("are HttpOnly, SameSite=Strict, sent with sign-in only, kept 180 days, and Secure over https", () => {
    const over = (url: string) => deviceCookie("v", url);
    expect(over("http://localhost:8080")).toBe(
      "portal_device=v; Path=/portal.v1.PortalAuthService/SignIn; HttpOnly; SameSite=Strict; Max-Age=15552000",
    );
    expect(over("https://api.example.com")).toBe(`${over("http://localhost:8080")}; Secure`);
  });
});
