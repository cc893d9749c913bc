/**
 * A regular expression for the canonical decimal strings of the integers from `min` to `max`: what proto3 JSON
 * writes for a 64-bit integer (`"0"`, `"-12"`, `"1500"`; no `+`, no leading zeros, no `-0`), limited to a
 * range. JSON Schema's `minimum` and `maximum` say nothing about strings, so the OpenAPI document states the
 * bounds of a 64-bit field (money in kobo among them) as this `pattern`, which every validator applies.
 *
 * The range is cut into runs that share a prefix and end in free digits (`1[0-9]{3}`), as a person writing it
 * by hand would. The syntax is that of ECMAScript and RE2 alike.
 */
export function integerPattern(min: bigint, max: bigint): string {
  if (min > max) throw new Error(`empty range ${min}..${max}`);
  const parts: string[] = [];
  // Negative numbers are "-" and a magnitude: -1 down to min.
  if (min < 0n) {
    const high = max < 0n ? -max : 1n;
    parts.push(`-(?:${magnitudes(high, -min).join("|")})`);
  }
  if (max >= 0n) parts.push(...magnitudes(min > 0n ? min : 0n, max));
  return `^(?:${parts.join("|")})$`;
}

/** Alternatives for the non-negative integers from `lo` to `hi`, written without leading zeros. */
function magnitudes(lo: bigint, hi: bigint): string[] {
  const out: string[] = [];
  const zero = lo === 0n;
  let from = zero ? 1n : lo;
  // Lengths whose every number is in the range are one alternative: `[1-9][0-9]{0,11}` is 1 to 999,999,999,999.
  let whole: [number, number] | undefined;
  while (from <= hi) {
    const digits = from.toString().length;
    const top = 10n ** BigInt(digits) - 1n;
    const to = hi < top ? hi : top;
    if (from === 10n ** BigInt(digits - 1) && to === top) whole = [whole?.[0] ?? digits, digits];
    else out.push(...sameLength(from.toString(), to.toString()));
    from = to + 1n;
  }
  if (whole) {
    const [a, b] = [whole[0] - 1, whole[1] - 1];
    out.unshift(`[1-9]${b === 0 ? "" : a === b ? free(a) : `[0-9]{${a},${b}}`}`);
  }
  return zero ? ["0", ...out] : out;
}

const span = (a: number, b: number) => (a === b ? `${a}` : a === 0 && b === 9 ? "[0-9]" : `[${a}-${b}]`);
const free = (n: number) => (n === 0 ? "" : n === 1 ? "[0-9]" : `[0-9]{${n}}`);

/** Alternatives for the digit strings from `lo` to `hi`, both of the same length (leading zeros kept). */
function sameLength(lo: string, hi: string): string[] {
  if (lo === hi) return [lo];
  const rest = lo.length - 1;
  const [a, b] = [Number(lo[0]), Number(hi[0])];
  if (rest === 0) return [span(a, b)];
  if (a === b) return sameLength(lo.slice(1), hi.slice(1)).map((p) => `${a}${p}`);
  const out: string[] = [];
  const loFull = /^0*$/.test(lo.slice(1));
  const hiFull = /^9*$/.test(hi.slice(1));
  // lo's first digit with the rest from lo's up; the whole digits strictly between; hi's with the rest up to hi's.
  if (!loFull) out.push(...sameLength(lo.slice(1), "9".repeat(rest)).map((p) => `${a}${p}`));
  const first = loFull ? a : a + 1;
  const last = hiFull ? b : b - 1;
  if (first <= last) out.push(`${span(first, last)}${free(rest)}`);
  if (!hiFull) out.push(...sameLength("0".repeat(rest), hi.slice(1)).map((p) => `${b}${p}`));
  return out;
}
