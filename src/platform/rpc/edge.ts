import type { DescMethod } from "@bufbuild/protobuf";
import type { ContextValues } from "@connectrpc/connect";
import type { ApiKeyService } from "../../apikeys/api-key.service.ts";
import type { RateDecision, RateLimiter } from "../../ratelimit/rate-limiter.ts";
import { constantTimeEqualStrings } from "../crypto/tokens.ts";
import { ApiError } from "../errors.ts";
import { rateClassOf } from "../http/rules.ts";
import { kCaller } from "./context.ts";

/** One call as the edge sees it, whichever face (REST, Connect, gRPC-Web, gRPC) it came in on. */
export interface EdgeCall {
  method: DescMethod;
  requestHeader: Headers;
  values: ContextValues;
  /** Headers to send with the response, success or error. */
  responseHeader: Headers;
}

/**
 * The cross-cutting pipeline that runs before every handler. The Connect interceptor and the REST
 * transcoder both call it, so the three faces authenticate, limit and fail identically.
 */
export type Edge = <T>(call: EdgeCall, next: () => Promise<T>) => Promise<T>;

/** The bearer token of an `Authorization` header, or undefined. */
export function bearer(header: Headers): string | undefined {
  const value = header.get("authorization");
  if (!value) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(value);
  return m ? m[1] : "";
}

/** The IETF RateLimit headers (draft-ietf-httpapi-ratelimit-headers) for a decision. */
export function rateLimitHeaders(cls: string, d: RateDecision): Record<string, string> {
  const windowSeconds = Math.max(1, Math.round(d.spec.capacity / d.spec.refillPerSecond));
  return {
    "ratelimit-policy": `"${cls}";q=${d.spec.capacity};w=${windowSeconds}`,
    ratelimit: `"${cls}";r=${d.remaining};t=${d.resetSeconds}`,
  };
}

/** Options for {@link createPartnerEdge}. */
export interface PartnerEdgeOptions {
  apiKeys: ApiKeyService;
  rateLimiter: RateLimiter;
}

/** The partner listener's edge: API key authentication, then the per-key rate limit. */
export function createPartnerEdge({ apiKeys, rateLimiter }: PartnerEdgeOptions): Edge {
  return async (call, next) => {
    const caller = await apiKeys.authenticate(bearer(call.requestHeader));
    call.values.set(kCaller, caller);
    const cls = rateClassOf(call.method);
    const decision = await rateLimiter.take(caller.keyId, cls);
    const headers = rateLimitHeaders(cls, decision);
    for (const [k, v] of Object.entries(headers)) call.responseHeader.set(k, v);
    if (!decision.allowed) {
      throw new ApiError("rate_limited", undefined, {
        retryAfterSeconds: decision.retryAfterSeconds,
        headers,
      });
    }
    return next();
  };
}

/** The internal listener's edge: the service token, compared in constant time. */
export function createInternalEdge(token: string): Edge {
  return async (call, next) => {
    const presented = bearer(call.requestHeader);
    if (!presented)
      throw new ApiError("unauthenticated", "Send the service token as `Authorization: Bearer …`.");
    if (!constantTimeEqualStrings(presented, token))
      throw new ApiError("unauthenticated", "The service token is not valid.");
    return next();
  };
}
