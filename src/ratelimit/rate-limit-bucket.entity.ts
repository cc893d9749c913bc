import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/**
 * A token bucket shared by every instance. Only the `rate_limit_take` function touches it, refilling from
 * the database clock so every instance sees one bucket whatever their own clocks say.
 */
export const RateLimitBucketEntity = defineEntity({
  name: "RateLimitBucket",
  tableName: "rate_limit_buckets",
  properties: {
    /** `<class>:<api key id>`, the class being `read` or `write` (CONTRACT.md §8). */
    bucketKey: p.text().primary(),
    /** Tokens left at `refilledAt` (fractional: refill is continuous). */
    tokens: p.double(),
    refilledAt: p.datetime(),
  },
});

/** A rate-limit bucket row. */
export type RateLimitBucket = InferEntity<typeof RateLimitBucketEntity>;
