import type { LazyEm } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { rateLimitHeaders } from "../platform/http/rate-limit-headers.ts";
import { rateClassOf } from "../platform/http/rules.ts";
import type { Metrics } from "../platform/metrics.ts";
import type { EdgeCall } from "../platform/rpc/pipeline.ts";
import type { Caller } from "../platform/tenancy.ts";
import { kLimits } from "../ratelimit/limits.context.ts";
import type { LimitsService } from "../ratelimit/limits.service.ts";
import type { RateLimiter } from "../ratelimit/rate-limiter.ts";

/** The partner API's rate limits: each key's buckets, and its partner's limits on expensive work. */
export interface RateLimits {
  rateLimiter: RateLimiter;
  /** Each key's limits: its own, its partner's, or the defaults (dedicated capacity, CONTRACT.md §8). */
  limits: LimitsService;
  metrics?: Metrics;
}

/**
 * Takes a token from the caller's key's bucket for the method's class (read or write), with the IETF RateLimit
 * headers on the answer, success or `429 rate_limited` with `Retry-After`. The caller's limits are resolved once
 * here and kept on the request, so handlers limiting expensive work read them from it, not from the database.
 */
export async function applyRateLimit(
  o: RateLimits,
  call: EdgeCall,
  em: LazyEm,
  caller: Caller,
): Promise<void> {
  const cls = rateClassOf(call.method);
  const own = await o.limits.forCaller(em, caller);
  call.values.set(kLimits, own);
  const decision = await o.rateLimiter.take(em, caller.keyId, cls, own[cls]);
  const headers = rateLimitHeaders(cls, decision);
  for (const [k, v] of Object.entries(headers)) call.responseHeader.set(k, v);
  if (decision.allowed) return;
  o.metrics?.rateLimitRejections.inc({ class: cls });
  throw new ApiError("rate_limited", undefined, { retryAfterSeconds: decision.retryAfterSeconds, headers });
}
