import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { ApiError } from "../platform/errors.ts";
import type { AnyResponse } from "../platform/http/rest-errors.ts";
import { restErrorBody } from "../platform/http/rest-errors.ts";
import { isDatabaseUnavailable, isPoolExhausted } from "../platform/rpc/errors.ts";

/** A request to a hosted page, on HTTP/1.1 or HTTP/2. */
export type Req = IncomingMessage | Http2ServerRequest;

const MAX_FORM_BYTES = 4096;

/**
 * The token in the path. Tokens are plain base62, so a path that does not decode (`%FF`, a lone `%`) is
 * simply no token: it is not found, never an exception.
 */
export function tokenOf(req: Req, prefix: string): string {
  const raw = (req.url ?? "").split("?")[0]?.slice(prefix.length) ?? "";
  try {
    return decodeURIComponent(raw);
  } catch {
    return "";
  }
}

/** A client that asked for JSON and not HTML (a script, not a browser) is answered in the API's error shape. */
export function wantsJson(req: Req): boolean {
  return (
    /application\/json/.test(String(req.headers.accept ?? "")) &&
    !/text\/html/.test(String(req.headers.accept ?? ""))
  );
}

export function cookie(req: Req, name: string): string | undefined {
  for (const part of String(req.headers.cookie ?? "").split(";")) {
    const at = part.indexOf("=");
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/** The posted form, at most 4 KiB, and only as a form. */
export async function readForm(req: Req): Promise<URLSearchParams> {
  const type = String(req.headers["content-type"] ?? "");
  if (!/^application\/x-www-form-urlencoded\s*(;|$)/i.test(type))
    throw new ApiError("unsupported_media_type", "Send the form.");
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_FORM_BYTES) throw new ApiError("payload_too_large");
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}

/** The request comes from our own page: same origin, by every signal the browser gives. */
export function sameSite(req: Req): boolean {
  const site = req.headers["sec-fetch-site"];
  if (site !== undefined && site !== "same-origin" && site !== "none") return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  if (origin === "null") return site === "same-origin";
  const host = req.headers.host ?? (req as Http2ServerRequest).authority;
  try {
    return new URL(String(origin)).host === host;
  } catch {
    return false;
  }
}

/** Answers a page: never cached, never framed, no scripts, forms only to ourselves unless `extra` says more. */
export function sendHtml(res: AnyResponse, status: number, html: string, extra: Record<string, string> = {}) {
  res.statusCode = status;
  const headers: Record<string, string> = {
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
    // same-origin, not no-referrer: with no-referrer browsers send `Origin: null` on the form post.
    "referrer-policy": "same-origin",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "content-security-policy":
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ...extra,
  };
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.setHeader("content-length", Buffer.byteLength(html));
  res.end(html);
}

/** Answers an error: the page `html` for a browser, the API's error body for a client that asked for JSON. */
export function sendError(req: Req, res: AnyResponse, requestId: string, err: ApiError, html: string) {
  if (err.retryAfterSeconds !== undefined) res.setHeader("retry-after", String(err.retryAfterSeconds));
  // The rest of a refused body is never read: on HTTP/1.1 the connection closes after the answer, so the
  // client's next request is not taken for more of this body.
  if (err.code === "payload_too_large" && req.httpVersionMajor === 1) res.setHeader("connection", "close");
  if (wantsJson(req)) {
    const body = restErrorBody(err, requestId);
    res.statusCode = err.httpStatus;
    res.setHeader("content-type", "application/json; charset=utf-8");
    res.setHeader("content-length", Buffer.byteLength(body));
    res.end(body);
    return;
  }
  sendHtml(res, err.httpStatus, html);
}

/**
 * The database away (a restart, a failover) or too busy to lend a connection in time: 503 with `Retry-After`, as
 * the API answers, and the person asked to reload; the page's transaction did not commit.
 */
export function unavailableError(err: unknown): ApiError | undefined {
  if (!isDatabaseUnavailable(err) && !isPoolExhausted(err)) return undefined;
  return new ApiError("unavailable", undefined, { retryAfterSeconds: 1, cause: err });
}
