import { describe, expect, it } from "vitest";
import { integerPattern } from "../../scripts/integer-pattern.ts";

// The document states a 64-bit field's bounds as a pattern over its decimal string: checked here against
// every integer around a range's ends, and against the spellings the service refuses.

const matches = (min: bigint, max: bigint) => {
  const re = new RegExp(integerPattern(min, max), "u");
  return (s: string) => re.test(s);
};

describe("integerPattern", () => {
  it("admits exactly the integers of the range, in canonical form", () => {
    const ranges: [number, number][] = [
      [0, 0],
      [1, 1],
      [-1, -1],
      [0, 9],
      [1, 1000],
      [-5, 5],
      [-1000, -1],
      [10, 99],
      [-999, -100],
      [7, 1234],
      [-4321, 87],
      [195, 2049],
    ];
    for (const [a, b] of ranges) {
      const ok = matches(BigInt(a), BigInt(b));
      const wrong: number[] = [];
      for (let v = a - 1200; v <= b + 1200; v++) if (ok(String(v)) !== (v >= a && v <= b)) wrong.push(v);
      expect(wrong, `${a}..${b}`).toEqual([]);
      for (const s of ["-0", "00", "01", "+1", " 1", "1 ", "0x1", "1e1", "1.0", ""])
        expect(ok(s), `${a}..${b} ${JSON.stringify(s)}`).toBe(false);
    }
  });

  it("holds at the ends of the 64-bit types and of the money fields", () => {
    const int64 = matches(-(2n ** 63n), 2n ** 63n - 1n);
    expect(["9223372036854775807", "-9223372036854775808", "0", "-1"].map(int64)).toEqual([
      true,
      true,
      true,
      true,
    ]);
    expect(["9223372036854775808", "-9223372036854775809", "99999999999999999999"].map(int64)).toEqual([
      false,
      false,
      false,
    ]);
    const principal = matches(1n, 1_000_000_000_000n);
    expect(["1", "999999999999", "1000000000000"].map(principal)).toEqual([true, true, true]);
    expect(["0", "1000000000001", "-5", "01000"].map(principal)).toEqual([false, false, false, false]);
  });
});
