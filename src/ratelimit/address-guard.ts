import type { BucketSpec } from "./limiters.service.ts";

/**
 * The limits per client address (docs/rate-limits.md): 100 failed authentications, then 10 a second; 300
 * hosted-page requests, then 50 a second (generous: behind a proxy, many people share one address).
 */
export const ADDRESS_LIMITS: AddressGuardOptions = {
  failures: { capacity: 100, refillPerSecond: 10 },
  pages: { capacity: 300, refillPerSecond: 50 },
};

/** Options for {@link createAddressGuard}. */
export interface AddressGuardOptions {
  /** Failed authentications (401s) a client address may cause. */
  failures: BucketSpec;
  /** Requests a client address may make to the hosted pages (consent, mandate, prompt). */
  pages: BucketSpec;
  /** Addresses remembered at once; the least recently seen are forgotten first. */
  maxAddresses?: number;
  now?: () => number;
}

/** The guard's answer: refused requests wait `retryAfterSeconds`. */
export type GuardDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

interface Bucket {
  tokens: number;
  at: number;
}

/** What {@link createAddressGuard} returns. */
export type AddressGuard = ReturnType<typeof createAddressGuard>;

/**
 * Limits per client address for traffic that has no API key to be limited by (CONTRACT.md §8): the hosted
 * pages, and failed authentications (guessed keys). Kept in each instance's memory, not in PostgreSQL: a
 * refusal must cost less than the request it refuses, so these limits are per instance (N instances admit up
 * to N times as much; the per-key limits that matter for partners stay shared). Bounded: at most
 * `maxAddresses` buckets per kind.
 */
export function createAddressGuard(o: AddressGuardOptions) {
  const now = o.now ?? (() => performance.now());
  const max = o.maxAddresses ?? 50_000;
  const kinds = { failures: new Map<string, Bucket>(), pages: new Map<string, Bucket>() };

  const current = (kind: keyof typeof kinds, address: string): Bucket => {
    const spec = o[kind];
    const map = kinds[kind];
    const t = now();
    const b = map.get(address);
    const bucket = b
      ? { tokens: Math.min(spec.capacity, b.tokens + ((t - b.at) / 1000) * spec.refillPerSecond), at: t }
      : { tokens: spec.capacity, at: t };
    // Re-inserted, so the map's order is least recently seen first.
    map.delete(address);
    if (map.size >= max) map.delete(map.keys().next().value as string);
    map.set(address, bucket);
    return bucket;
  };
  const refused = (kind: keyof typeof kinds, b: Bucket): GuardDecision => ({
    allowed: false,
    retryAfterSeconds: Math.max(1, Math.ceil((1 - b.tokens) / o[kind].refillPerSecond)),
  });

  return {
    /** Charges a failed authentication to the address. */
    failed(address: string): void {
      const b = current("failures", address);
      b.tokens = Math.max(0, b.tokens - 1);
    },

    /**
     * Takes a failure's token up front, for work that is expensive before it knows whether it failed (a
     * password hash): concurrent attempts from one address cannot all pass the check and then overdraw it.
     * Give it back with {@link refund} when the attempt succeeds.
     */
    reserveFailure(address: string): GuardDecision {
      const b = current("failures", address);
      if (b.tokens < 1) return refused("failures", b);
      b.tokens -= 1;
      return { allowed: true };
    },

    /** Whether the address is over its budget of failures now, without taking anything. */
    failuresLeft(address: string): GuardDecision {
      const b = current("failures", address);
      return b.tokens < 1 ? refused("failures", b) : { allowed: true };
    },

    /** Gives back a token taken by {@link reserveFailure}, for an attempt that succeeded. */
    refund(address: string): void {
      const b = current("failures", address);
      b.tokens = Math.min(o.failures.capacity, b.tokens + 1);
    },

    /** Takes one hosted-page request from the address's bucket. */
    takePage(address: string): GuardDecision {
      const b = current("pages", address);
      if (b.tokens < 1) return refused("pages", b);
      b.tokens -= 1;
      return { allowed: true };
    },
  };
}
