import { describe, expect, it } from "vitest";
import { isId, newId, ulid } from "../../src/platform/ids.ts";

describe("ids", () => {
  it("are prefixed ULIDs", () => {
    const id = newId("req");
    expect(id).toMatch(/^req_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(isId("req", id)).toBe(true);
    expect(isId("key", id)).toBe(false);
    expect(isId("req", "req_../../etc/passwd")).toBe(false);
  });

  it("encode the time in the first ten characters", () => {
    expect(ulid(0).slice(0, 10)).toBe("0000000000");
    expect(ulid(1_469_918_176_385).slice(0, 10)).toBe("01ARYZ6S41");
  });

  it("sort by creation and never repeat, even within a millisecond", () => {
    const ids = Array.from({ length: 5000 }, () => newId("evt"));
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  it("draw every character of the random part evenly", () => {
    // An explicit time gives a fresh random part each call: each of its 16 positions is a uniform draw from
    // the 32 characters (a biased generator would favour some, or never reach the last one).
    const counts = new Map<string, number>();
    const n = 4000;
    for (let i = 0; i < n; i++)
      for (const c of ulid(1_700_000_000_000).slice(10)) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(32);
    const expected = (n * 16) / 32;
    for (const count of counts.values()) expect(Math.abs(count - expected)).toBeLessThan(expected * 0.1);
  });
});
