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
});
