import type { BucketSpec } from "../ratelimit/limiters.service.ts";
import { bucket, type Env, int } from "./env.ts";

/** How much each API key may call, and how much expensive work each partner may start. */
export interface RateLimitSettings {
  /** Per-API-key rate limits. */
  rateLimits: { read: BucketSpec; write: BucketSpec };
  /** Limits on expensive work per partner (docs/rate-limits.md "Limits on expensive work"). */
  expensiveLimits: {
    /**
     * SNAPSHOT_CONCURRENCY_PER_KEY: snapshot reads one API key may have in flight on one instance; past it,
     * 429 `too_many_concurrent_reads` with `Retry-After: 1`.
     */
    snapshotConcurrencyPerKey: number;
    /**
     * DISBURSEMENTS_PER_USER_PER_DAY: disbursements one partner may create for one user in one environment
     * in one Lagos day; past it, 429 `user_daily_disbursement_limit` until the next Lagos midnight.
     */
    disbursementsPerUserPerDay: number;
  };
}

/** The contract's default limits (CONTRACT.md §8). */
export const defaultRateLimits = {
  read: { capacity: 500, refillPerSecond: 100 },
  write: { capacity: 50, refillPerSecond: 25 },
} as const satisfies RateLimitSettings["rateLimits"];

/** The default limits on expensive work (docs/rate-limits.md). */
export const defaultExpensiveLimits = {
  snapshotConcurrencyPerKey: 8,
  disbursementsPerUserPerDay: 10,
} as const satisfies RateLimitSettings["expensiveLimits"];

/** Reads RATE_LIMIT_READ, RATE_LIMIT_WRITE, SNAPSHOT_CONCURRENCY_PER_KEY and DISBURSEMENTS_PER_USER_PER_DAY. */
export function readRateLimitSettings(env: Env): RateLimitSettings {
  return {
    rateLimits: {
      read: bucket(env, "RATE_LIMIT_READ", defaultRateLimits.read),
      write: bucket(env, "RATE_LIMIT_WRITE", defaultRateLimits.write),
    },
    expensiveLimits: {
      snapshotConcurrencyPerKey: int(
        env,
        "SNAPSHOT_CONCURRENCY_PER_KEY",
        defaultExpensiveLimits.snapshotConcurrencyPerKey,
        1,
        100_000,
      ),
      disbursementsPerUserPerDay: int(
        env,
        "DISBURSEMENTS_PER_USER_PER_DAY",
        defaultExpensiveLimits.disbursementsPerUserPerDay,
        1,
        1_000_000,
      ),
    },
  };
}
