/**
 * The disbursement fee (CONTRACT.md §6): principal × rate ÷ 10,000, rounded half up to the kobo, in integer
 * arithmetic only. `floor(x + ½)` with x = p·b/10⁴ is `floor((2·p·b + 10⁴) / (2·10⁴))`.
 */
export function feeKobo(principalKobo: bigint, rateBps: number): bigint {
  if (principalKobo < 0n) throw new RangeError("principal must not be negative");
  if (!Number.isInteger(rateBps) || rateBps < 0 || rateBps > 10_000)
    throw new RangeError("rate must be 0 to 10000 bps");
  return (2n * principalKobo * BigInt(rateBps) + 10_000n) / 20_000n;
}
