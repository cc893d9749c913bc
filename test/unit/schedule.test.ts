import { describe, expect, it } from "vitest";
import { keyStatus, nextQuarterStart, publicationOrder } from "../../src/signing/schedule.ts";

describe("signing key schedule", () => {
  it("finds the next quarter turn in UTC", () => {
    expect(nextQuarterStart(new Date("2026-11-22T04:00:00Z")).toISOString()).toBe("2027-01-01T00:00:00.000Z");
    expect(nextQuarterStart(new Date("2027-01-01T00:00:00Z")).toISOString()).toBe("2027-04-01T00:00:00.000Z");
    expect(nextQuarterStart(new Date("2027-03-31T23:59:59.999Z")).toISOString()).toBe(
      "2027-04-01T00:00:00.000Z",
    );
    expect(nextQuarterStart(new Date("2027-09-30T12:00:00Z")).toISOString()).toBe("2027-10-01T00:00:00.000Z");
  });

  it("derives the status from the key's times, boundaries included", () => {
    const key = {
      notBefore: new Date("2027-04-01T00:00:00Z"),
      retiresAt: new Date("2027-07-01T00:00:00Z"),
      notAfter: new Date("2027-07-31T00:00:00Z"),
    };
    expect(keyStatus(key, new Date("2027-03-31T23:59:59.999Z"))).toBe("INCOMING");
    expect(keyStatus(key, new Date("2027-04-01T00:00:00Z"))).toBe("ACTIVE");
    expect(keyStatus(key, new Date("2027-07-01T00:00:00Z"))).toBe("OUTGOING");
    expect(keyStatus(key, new Date("2027-07-31T00:00:00Z"))).toBe("RETIRED");
  });

  it("publishes the ACTIVE key first", () => {
    const at = (d: string) => new Date(d);
    const sorted = publicationOrder([
      { status: "OUTGOING" as const, notBefore: at("2027-01-01") },
      { status: "INCOMING" as const, notBefore: at("2027-07-01") },
      { status: "ACTIVE" as const, notBefore: at("2027-04-01") },
    ]);
    expect(sorted.map((k) => k.status)).toEqual(["ACTIVE", "INCOMING", "OUTGOING"]);
  });
});
