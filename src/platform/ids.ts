import { randomFillSync } from "node:crypto";

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
  | "req";

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

// Randomness is drawn from the CSPRNG in blocks: one system call per 512 ids instead of one per id.
const pool = Buffer.alloc(5 * 1024);
let poolAt = pool.length;

let lastMs = -1;
/** The 80 random bits of the last id, as 16 base32 digits (0-31), kept to make ids monotonic within a ms. */
const lastRandom = new Uint8Array(16);

function freshRandom(): void {
  if (poolAt + 10 > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  // 10 bytes = 80 bits = 16 base32 digits.
  let acc = 0;
  let bits = 0;
  let digit = 0;
  for (let i = 0; i < 10; i++) {
    acc = (acc << 8) | (pool[poolAt + i] as number);
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      lastRandom[digit++] = (acc >> bits) & 31;
    }
    acc &= (1 << bits) - 1;
  }
  poolAt += 10;
}

function increment(): void {
  for (let i = 15; i >= 0; i--) {
    const v = (lastRandom[i] as number) + 1;
    if (v < 32) {
      lastRandom[i] = v;
      return;
    }
    lastRandom[i] = 0;
  }
}

/**
 * A ULID (https://github.com/ulid/spec): 48-bit time, 80 random bits. Ids made for "now" are monotonic
 * within this process; an explicit time gives a fresh random part.
 */
export function ulid(at?: number): string {
  if (at !== undefined) {
    freshRandom();
    return encode(at);
  }
  const ms = Date.now();
  if (ms > lastMs) {
    lastMs = ms;
    freshRandom();
  } else {
    increment();
  }
  return encode(lastMs);
}

function encode(ms: number): string {
  let out = "";
  let t = ms;
  const time: string[] = [];
  for (let i = 0; i < 10; i++) {
    time.push(CROCKFORD[t % 32] as string);
    t = Math.floor(t / 32);
  }
  for (let i = 9; i >= 0; i--) out += time[i];
  for (let i = 0; i < 16; i++) out += CROCKFORD[lastRandom[i] as number];
  return out;
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
