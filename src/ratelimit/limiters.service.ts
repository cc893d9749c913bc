/**
 * The rate limit feature's limiters, as other features and the composition reach them: the per-key buckets of
 * the edge, the per-address guard, the per-key count of work in flight, the keyed buckets taken inside a unit
 * of work, and the per-partner limit on expensive work.
 */

/** A token bucket: `capacity` tokens, refilled at `refillPerSecond` (CONTRACT.md §8). */
export interface BucketSpec {
  capacity: number;
  refillPerSecond: number;
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
