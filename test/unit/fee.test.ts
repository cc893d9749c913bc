import { describe, expect, it } from "vitest";
import { feeKobo } from "../../src/disbursements/fee.ts";

describe("disbursement fee", () => {
  it("rounds half a kobo up, and anything less down, exactly", () => {
    // 1 kobo at 5000 bps = 0.5 kobo → 1; at 4999 bps = 0.4999 → 0.
    expect(feeKobo(1n, 5_000)).toBe(1n);
    expect(feeKobo(1n, 4_999)).toBe(0n);
    // 150 bps of 1,234,567 kobo = 18,518.505 → 18,519; of 1,234,533 = 18,517.995 → 18,518.
    expect(feeKobo(1_234_567n, 150)).toBe(18_519n);
    expect(feeKobo(1_234_533n, 150)).toBe(18_518n);
    // 250 bps of 10,002 = 250.05 → 250; of 10,020 = 250.5 → 251.
    expect(feeKobo(10_002n, 250)).toBe(250n);
    expect(feeKobo(10_020n, 250)).toBe(251n);
    expect(feeKobo(5_000_000n, 0)).toBe(0n);
    expect(feeKobo(5_000_000n, 10_000)).toBe(5_000_000n);
  });

  it("agrees with exact rational arithmetic on random cases, far beyond floating point's reach", () => {
    for (let i = 0; i < 5_000; i++) {
      const principal =
        BigInt(Math.floor(Math.random() * 1e12)) * 1_000n + BigInt(Math.floor(Math.random() * 1_000));
      const rate = Math.floor(Math.random() * 10_001);
      const numerator = principal * BigInt(rate);
      const floor = numerator / 10_000n;
      const remainder = numerator % 10_000n;
      expect(feeKobo(principal, rate)).toBe(remainder >= 5_000n ? floor + 1n : floor);
    }
  });

  it("refuses rates and principals outside the contract", () => {
    expect(() => feeKobo(-1n, 100)).toThrow();
    expect(() => feeKobo(1n, 10_001)).toThrow();
    expect(() => feeKobo(1n, 1.5)).toThrow();
  });
});
