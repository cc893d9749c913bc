import type { LazyEm } from "../platform/db/orm.ts";
import type { BucketSpec } from "./limiters.service.ts";
import { bucketChanged } from "./limiters.service.ts";
import { rateLimitRepository } from "./rate-limit.repository.ts";

/** Reads and writes have separate buckets (CONTRACT.md §8). */
export type RateClass = "read" | "write";

/** The outcome of {@link RateLimiter.take}. */
export interface RateDecision {
  allowed: boolean;
  /** Tokens left (approximate across instances). */
  remaining: number;
  /** Seconds until a token is available (when denied). */
  retryAfterSeconds: number;
  /** Seconds until the bucket would be full again. */
  resetSeconds: number;
  spec: BucketSpec;
}

/** A per-API-key token bucket shared by every instance through PostgreSQL. */
export interface RateLimiter {
  /**
   * Takes a token from the key's bucket of `cls`, whose limits are `spec` (the key's own, its partner's or the
   * defaults: see limits.service.ts); a refill from the shared bucket runs on `em()` (never inside a transaction).
   */
  take(em: LazyEm, keyId: string, cls: RateClass, spec: BucketSpec): Promise<RateDecision>;
}

/** Options for {@link createRateLimiter}. */
export interface RateLimiterOptions {
  /** How long tokens taken from the shared bucket may wait locally before they are thrown away. */
  leaseTtlMs?: number;
}

interface Lease {
  tokens: number;
  expiresAt: number;
  /** The shared bucket's level after our last take. */
  shared: number;
  refill: Promise<void> | undefined;
  /** Requests on this instance waiting for tokens. */
  waiting: number;
  /** Tokens the last refill got from the shared bucket. */
  lastGranted: number;
  /** The limits the lease was taken under. */
  spec: BucketSpec;
}

/** Tokens a refill asks the shared bucket for: a tenth of a second's refill, at most a tenth of the bucket. */
const leaseSize = (spec: BucketSpec) =>
  Math.max(1, Math.min(Math.ceil(spec.refillPerSecond / 10), Math.floor(spec.capacity / 10)));

/** The answer to a take, from where the lease and the shared bucket stand. */
function decision(lease: Lease, spec: BucketSpec, allowed: boolean): RateDecision {
  const remaining = Math.max(0, Math.min(spec.capacity, Math.floor(lease.tokens + lease.shared)));
  const deficit = Math.max(0, 1 - lease.shared);
  return {
    allowed,
    remaining,
    retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil(deficit / spec.refillPerSecond)),
    resetSeconds: Math.ceil(Math.max(0, spec.capacity - remaining) / spec.refillPerSecond),
    spec,
  };
}

/** The bucket's lease on this instance, new when there is none, emptied when its limits changed. */
function leaseUnder(leases: Map<string, Lease>, bucket: string, spec: BucketSpec): Lease {
  const lease = leases.get(bucket);
  if (!lease) {
    const fresh: Lease = {
      tokens: 0,
      expiresAt: 0,
      shared: spec.capacity,
      refill: undefined,
      waiting: 0,
      lastGranted: 0,
      spec,
    };
    leases.set(bucket, fresh);
    return fresh;
  }
  if (lease.spec !== spec && bucketChanged(lease.spec, spec)) {
    // New limits: tokens taken under the old ones are not spent (a lowered bucket would admit them), and
    // the next refill, under the new ones, tells where the shared bucket stands.
    lease.tokens = 0;
    lease.expiresAt = 0;
    lease.shared = Math.min(lease.shared, spec.capacity);
    lease.spec = spec;
  }
  return lease;
}

/**
 * The shared bucket lives in one PostgreSQL row per key and class, refilled from the database clock by
 * `rate_limit_take()`. To keep the hot path off that row, each instance takes a small lease of tokens at
 * a time (a tenth of a second's refill, at most a tenth of the bucket) and spends it locally, topping it up
 * in the background when half is gone. Every admitted request spent a token taken from the shared row,
 * so instances together never exceed the bucket; a lease that goes unspent expires, which can only make
 * the limit stricter for a moment, never looser. When the operator changes a key's limits, its leases taken
 * under the old ones are dropped at its next request, so the new limits hold from then on.
 */
export function createRateLimiter({ leaseTtlMs = 1_000 }: RateLimiterOptions = {}): RateLimiter {
  const leases = new Map<string, Lease>();

  const refill = (em: LazyEm, bucket: string, lease: Lease, spec: BucketSpec): Promise<void> => {
    lease.refill ??= (async () => {
      try {
        const row = await rateLimitRepository.take(
          em(),
          bucket,
          spec.capacity,
          spec.refillPerSecond,
          // Enough for everyone already waiting on this instance, so a burst costs one round trip.
          Math.max(leaseSize(spec), lease.waiting),
        );
        if (!row) return;
        const now = Date.now();
        if (now >= lease.expiresAt) lease.tokens = 0;
        lease.tokens += Number(row.granted);
        lease.lastGranted = Number(row.granted);
        lease.shared = Number(row.remaining);
        lease.expiresAt = now + leaseTtlMs;
      } finally {
        lease.refill = undefined;
      }
    })();
    return lease.refill;
  };

  return {
    async take(em, keyId, cls, spec) {
      const bucket = `${cls}:${keyId}`;
      const lease = leaseUnder(leases, bucket, spec);
      if (Date.now() >= lease.expiresAt) lease.tokens = 0;
      // Wait for tokens while the shared bucket still hands some out; others waiting here may take a
      // refill's tokens first, so try again, but stop as soon as a refill comes back empty.
      for (let round = 0; lease.tokens < 1 && round < 5; round++) {
        lease.waiting++;
        try {
          await refill(em, bucket, lease, spec);
        } finally {
          lease.waiting--;
        }
        if (lease.lastGranted === 0) break;
      }
      if (lease.tokens < 1) return decision(lease, spec, false);
      lease.tokens -= 1;
      if (leaseSize(spec) > 1 && lease.tokens < leaseSize(spec) / 2 && !lease.refill) {
        refill(em, bucket, lease, spec).catch(() => undefined);
      }
      return decision(lease, spec, true);
    },
  };
}
