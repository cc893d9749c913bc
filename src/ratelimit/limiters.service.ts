/**
 * The rate limit feature's limiters, as other features and the composition reach them: the per-key buckets of
 * the edge, the per-address guard, the per-key count of work in flight, the keyed buckets taken inside a unit
 * of work, and the per-partner limit on expensive work.
 */

import type { Em } from "../platform/db/orm.ts";
import { rateLimitRepository } from "./rate-limit.repository.ts";

/** A token bucket: `capacity` tokens, refilled at `refillPerSecond` (CONTRACT.md §8). */
export interface BucketSpec {
  capacity: number;
  refillPerSecond: number;
}

/** Whether two buckets differ. */
export const bucketChanged = (a: BucketSpec, b: BucketSpec): boolean =>
  a.capacity !== b.capacity || a.refillPerSecond !== b.refillPerSecond;

/**
 * Carries a key's bucket over to new limits, in the transaction that changes them: the tokens left are kept,
 * refilled at the old rate up to now and capped at the new capacity.
 */
export function settleBucket(tx: Em, bucket: string, was: BucketSpec, now: BucketSpec): Promise<void> {
  return rateLimitRepository.settle(tx, bucket, was, now);
}

export {
  ADDRESS_LIMITS,
  type AddressGuard,
  type AddressGuardOptions,
  createAddressGuard,
  type GuardDecision,
} from "./address-guard.ts";
export { type ConcurrencyLimiter, createConcurrencyLimiter } from "./concurrency-limiter.ts";
export { type BucketDecision, createKeyedBuckets, type KeyedBuckets } from "./keyed-buckets.ts";
export {
  createRateLimiter,
  type RateClass,
  type RateDecision,
  type RateLimiter,
  type RateLimiterOptions,
} from "./rate-limiter.ts";
export { createWorkLimiter, type WorkDecision, type WorkLimiter } from "./work-limiter.ts";
