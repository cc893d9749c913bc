import type { Em } from "../platform/db/orm.ts";
import type { BucketSpec } from "./limiters.service.ts";
import { rateLimitRepository } from "./rate-limit.repository.ts";

/** The outcome of {@link KeyedBuckets.take}: refused requests wait `retryAfterSeconds`. */
export type BucketDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/**
 * A family of token buckets of one kind, one per key (a client address, an account, a device), all with the
 * same limits, kept in PostgreSQL and so shared by every instance of the service.
 */
export interface KeyedBuckets {
  /** The family's name; every bucket of it is stored as `<kind>:<key>`. */
  readonly kind: string;
  /** Every bucket's size and refill. */
  readonly spec: BucketSpec;
  /** Takes a token from `key`'s bucket on `em` (in its transaction when it has one); a refusal takes none. */
  take(em: Em, key: string): Promise<BucketDecision>;
  /** Gives back a token {@link take} took, for an attempt that turned out not to be what the family counts. */
  giveBack(em: Em, key: string): Promise<void>;
  /** Fills `key`'s bucket again. */
  fill(em: Em, key: string): Promise<void>;
  /**
   * Seconds after its last use by which any bucket of the family is full again: a row idle that long says
   * nothing a missing row does not, so the retention purge deletes it.
   */
  readonly fullAfterSeconds: number;
}

/**
 * Buckets of one kind for limits taken inside a request's unit of work, on its connection, through the same
 * `rate_limit_take()` as the per-key limits, so that every instance draws on one bucket whatever its own clock
 * says. Their rows are deleted once full again (`rateLimitBucketsPurge`), so keys met once (an address, an
 * email) are not kept for ever.
 */
export function createKeyedBuckets(kind: string, spec: BucketSpec): KeyedBuckets {
  const bucket = (key: string) => `${kind}:${key}`;
  return {
    kind,
    spec,
    fullAfterSeconds: spec.capacity / spec.refillPerSecond,
    async take(em, key) {
      const row = await rateLimitRepository.takeWithin(
        em,
        bucket(key),
        spec.capacity,
        spec.refillPerSecond,
        1,
      );
      if (row && Number(row.granted) >= 1) return { allowed: true };
      const missing = Math.max(0, 1 - Number(row?.remaining ?? 0));
      return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(missing / spec.refillPerSecond)) };
    },
    giveBack: (em, key) => rateLimitRepository.giveBack(em, bucket(key), spec, 1),
    fill: (em, key) => rateLimitRepository.fill(em, bucket(key)),
  };
}
