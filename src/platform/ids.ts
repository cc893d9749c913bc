import { randomFillSync } from "node:crypto";
import { encodeTime, ulid as freshUlid, monotonicFactory } from "ulid";

/** The id prefixes of CONTRACT.md §1, one per resource. */
export type IdPrefix =
  | "ptn"
  | "key"
  | "usr"
  | "cns"
  | "cnl"
  | "snp"
  | "whk"
  | "evt"
  | "dlv"
  | "dsb"
  | "rpy"
  | "req"
  | "otp"
  | "pss"
  | "mbr"
  | "inv"
  | "ses"
  | "aud";

// The package draws one CSPRNG byte per random character (16 calls per id), which cost more than the rest of
// a cached read; this hands it bytes from a pooled CSPRNG buffer instead. A byte / 256 maps onto the 32
// characters exactly uniformly (256 = 8 × 32), unlike the package's own byte / 255.
const pool = Buffer.alloc(4096);
let next = pool.length;
const prng = (): number => {
  if (next === pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  return (pool[next++] as number) / 256;
};

// The first id of each millisecond draws 80 fresh random bits from the CSPRNG; the next ones in that
// millisecond increment them, so ids made in this process sort by creation.
const monotonic = monotonicFactory(prng);

/**
 * A ULID (https://github.com/ulid/spec): 48-bit time, 80 random bits. Ids made for "now" are monotonic
 * within this process; an explicit time (a signing key's start) gives a fresh random part.
 */
export function ulid(at?: number): string {
  // The package's `ulid(seedTime)` reads a seed of 0 as "now": the time is encoded here, beside a fresh
  // random part.
  return at === undefined ? monotonic() : encodeTime(at, 10) + freshUlid(undefined, prng).slice(10);
}

/** A new prefixed ULID such as `req_01JD4W6Y0M4K6H2Q8V3Z5N7B9C`; ids made in one process sort by creation. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${ulid()}`;
}

const idShape = /^[a-z]{3}_[0-9A-HJKMNP-TV-Z]{26}$/;

/** True when `value` is a well-formed id with the given prefix. Cheap enough to run before any query. */
export function isId(prefix: IdPrefix, value: string): boolean {
  return value.startsWith(`${prefix}_`) && idShape.test(value);
}
