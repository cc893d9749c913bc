import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { cors as connectCors } from "@connectrpc/connect";

type AnyRequest = IncomingMessage | Http2ServerRequest;
type AnyResponse = ServerResponse | Http2ServerResponse;

/** Methods of every face: the REST verbs, and Connect's GET and POST (gRPC-Web is POST). */
const ALLOWED_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"].join(", ");
/** What a browser client sends: Connect's and gRPC-Web's own headers, the API key and the idempotency key. */
const ALLOWED_HEADERS = [
  ...connectCors.allowedHeaders,
  "Authorization",
  "Idempotency-Key",
  "X-Request-Id",
].join(", ");
/** What a browser client may read: the protocols' status headers, rate limits, the request id, replays. */
const EXPOSED_HEADERS = [
  ...connectCors.exposedHeaders,
  "RateLimit",
  "RateLimit-Policy",
  "Retry-After",
  "X-Request-Id",
  "Idempotent-Replayed",
].join(", ");
/** How long a browser may cache a preflight's answer. */
const MAX_AGE_SECONDS = "7200";

/**
 * CORS for the API's faces, from an exact list of origins (CORS_ALLOWED_ORIGINS; none by default, and then no
 * header at all). A request from a listed origin gets its origin back and the headers it may read; a preflight
 * from one is answered here (204); from any other origin, nothing is added, so the browser keeps its page out.
 * Returns true when it answered the request itself.
 */
export function createCors(origins: readonly string[]) {
  const allowed = new Set(origins);
  return (req: AnyRequest, res: AnyResponse): boolean => {
    if (allowed.size === 0) return false;
    res.setHeader("vary", "Origin");
    const origin = req.headers.origin;
    const preflight = req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
    if (typeof origin !== "string" || !allowed.has(origin)) {
      if (!preflight) return false;
      // A preflight from an origin not listed: no CORS headers, so the browser sends nothing.
      req.resume();
      res.statusCode = 403;
      res.end();
      return true;
    }
    res.setHeader("access-control-allow-origin", origin);
    if (!preflight) {
      res.setHeader("access-control-expose-headers", EXPOSED_HEADERS);
      return false;
    }
    req.resume();
    res.setHeader("access-control-allow-methods", ALLOWED_METHODS);
    res.setHeader("access-control-allow-headers", ALLOWED_HEADERS);
    res.setHeader("access-control-max-age", MAX_AGE_SECONDS);
    res.statusCode = 204;
    res.end();
    return true;
  };
}
