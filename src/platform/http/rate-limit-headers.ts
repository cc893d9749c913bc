/** What a token bucket said about one request, as far as the response headers tell it. */
export interface BucketAnswer {
  spec: { capacity: number; refillPerSecond: number };
  remaining: number;
  resetSeconds: number;
}

/** The IETF RateLimit headers (draft-ietf-httpapi-ratelimit-headers) for a bucket's answer in class `cls`. */
export function rateLimitHeaders(cls: string, d: BucketAnswer): Record<string, string> {
  const windowSeconds = Math.max(1, Math.round(d.spec.capacity / d.spec.refillPerSecond));
  return {
    "ratelimit-policy": `"${cls}";q=${d.spec.capacity};w=${windowSeconds}`,
    ratelimit: `"${cls}";r=${d.remaining};t=${d.resetSeconds}`,
  };
}
