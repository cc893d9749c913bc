import type { BucketSpec } from "../config.ts";
import type { Em } from "../platform/db/orm.ts";
import { rateLimitRepository } from "./rate-limit.repository.ts";

/** The outcome of {@link WorkLimiter.take}. */
export type WorkDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/** A token bucket per partner and environment for one kind of expensive work, shared by every instance. */
export interface WorkLimiter {
  readonly spec: BucketSpec;
  /** Takes a token on `em` (in its transaction when it has one). */
  take(em: Em, tenant: { partnerId: string; environment: string }): Promise<WorkDecision>;
}

/**
 * A per-partner limit on work that costs more than the request asking for it (webhook test sends and replays:
 * each is a delivery to make). Unlike the per-key limits of the edge, it is taken inside the request's unit of
 * work, on its connection: a request refused or rolled back later gives its token back, and no second pooled
 * connection is taken while the request holds a transaction.
 */
export function createWorkLimiter(kind: string, spec: BucketSpec): WorkLimiter {
  return {
    spec,
    async take(em, { partnerId, environment }) {
      const row = await rateLimitRepository.takeWithin(
        em,
        `${kind}:${partnerId}:${environment}`,
        spec.capacity,
        spec.refillPerSecond,
        1,
      );
      if (row && Number(row.granted) >= 1) return { allowed: true };
      const missing = Math.max(0, 1 - Number(row?.remaining ?? 0));
      return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(missing / spec.refillPerSecond)) };
    },
  };
}
