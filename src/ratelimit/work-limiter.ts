import type { Em } from "../platform/db/orm.ts";
import type { BucketSpec } from "./limiters.service.ts";
import { rateLimitRepository } from "./rate-limit.repository.ts";

/** The outcome of {@link WorkLimiter.take}. */
export type WorkDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/** A token bucket per partner and environment for one kind of expensive work, shared by every instance. */
export interface WorkLimiter {
  readonly spec: BucketSpec;
  /**
   * Takes `want` tokens (1 by default) on `em` (in its transaction when it has one). When fewer are there, the
   * answer is no, but the tokens there were are taken: the caller's transaction must roll back (it does, as it
   * throws the refusal), which gives them back.
   */
  take(em: Em, tenant: { partnerId: string; environment: string }, want?: number): Promise<WorkDecision>;
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
    async take(em, { partnerId, environment }, want = 1) {
      const row = await rateLimitRepository.takeWithin(
        em,
        `${kind}:${partnerId}:${environment}`,
        spec.capacity,
        spec.refillPerSecond,
        want,
      );
      if (row && Number(row.granted) >= want) return { allowed: true };
      const missing = Math.max(0, want - Number(row?.granted ?? 0) - Number(row?.remaining ?? 0));
      return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(missing / spec.refillPerSecond)) };
    },
  };
}
