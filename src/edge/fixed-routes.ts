import type { ProviderWebhooks } from "../disbursements/provider-webhooks.ts";
import { docsPaths, loadDocs } from "../docs/reference.ts";
import { constantTimeEqualStrings } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { failpoint } from "../platform/failpoints.ts";
import { type AnyResponse, writeJson, writeRestError } from "../platform/http/rest-errors.ts";
import { type AnyRequest, readBody } from "../platform/http/transcoder.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import { toApiError } from "../platform/rpc/errors.ts";
import { MAX_BODY_BYTES } from "./connect.ts";
import { requestIdOf } from "./request-id.ts";

/**
 * The payment provider's webhook: 200 once verified and recorded (or knowingly ignored), 401 for a bad
 * signature, 500 when the outcome could not be learnt or recorded, so the provider sends it again.
 */
export async function receiveProviderWebhook(
  em: Em,
  webhooks: ProviderWebhooks,
  req: AnyRequest,
  res: AnyResponse,
  logger: Logger,
): Promise<void> {
  const requestId = requestIdOf(req);
  try {
    if (req.method !== "POST") throw new ApiError("method_not_allowed", "Use POST.");
    const body = await readBody(req, MAX_BODY_BYTES);
    const signature = req.headers["x-paystack-signature"];
    const result = await webhooks.receive(em, body, typeof signature === "string" ? signature : undefined);
    if (result.status === "bad_signature")
      throw new ApiError("unauthenticated", "The x-paystack-signature header does not match the body.");
    if (result.status === "malformed") throw new ApiError("invalid_request", "The body is not JSON.");
    writeJson(res, 200, { received: true });
  } catch (err) {
    // Not recorded: any 5xx makes the provider send it again.
    if (!(err instanceof ApiError)) logger.error("provider webhook not recorded", { err, requestId });
    writeRestError(res, toApiError(err, logger.child({ requestId })), requestId);
  }
}

/** The OpenAPI document and its reference page: public, cacheable, the same bytes for everyone. */
const docs = loadDocs();

/** Serves the OpenAPI document or its reference page; false when the URL is neither. */
export function serveDocs(req: AnyRequest, res: AnyResponse, url: string): boolean {
  if (!url.startsWith(docsPaths.openapi) && !url.startsWith(docsPaths.reference)) return false;
  const pathOnly = url.split("?")[0] ?? "";
  if (pathOnly !== docsPaths.openapi && pathOnly !== docsPaths.reference) return false;
  if (req.method !== "GET" && req.method !== "HEAD") {
    writeRestError(res, new ApiError("method_not_allowed", "Use GET."), requestIdOf(req));
    return true;
  }
  const html = pathOnly === docsPaths.reference;
  const body = html ? docs.html : docs.json;
  res.setHeader("content-type", html ? "text/html; charset=utf-8" : "application/json; charset=utf-8");
  res.setHeader("cache-control", "public, max-age=300");
  if (html) res.setHeader("content-security-policy", "default-src 'none'; style-src 'unsafe-inline'");
  res.setHeader("content-length", Buffer.byteLength(body));
  res.statusCode = 200;
  res.end(req.method === "HEAD" ? "" : body);
  return true;
}

/** `/healthz` (the process is up) and `/readyz` (its database answers); false when the URL is neither. */
export function serveHealth(url: string, res: AnyResponse, ready: () => Promise<boolean>): boolean {
  if (url === "/healthz") {
    failpoint("healthz");
    writeJson(res, 200, { status: "ok" });
    return true;
  }
  if (url !== "/readyz") return false;
  void ready().then((ok) => writeJson(res, ok ? 200 : 503, { status: ok ? "ready" : "unavailable" }));
  return true;
}

/** `/metrics` (Prometheus text) on the internal listener, behind the service token like the internal API. */
export async function serveMetrics(
  req: AnyRequest,
  res: AnyResponse,
  metrics: Metrics,
  token: string,
): Promise<void> {
  const auth = String(req.headers.authorization ?? "");
  const presented = auth.startsWith("Bearer ") ? auth.slice(7) : "";
  if (!presented || !constantTimeEqualStrings(presented, token)) {
    return writeRestError(
      res,
      new ApiError("unauthenticated", "Send the service token as `Authorization: Bearer …`."),
      requestIdOf(req),
    );
  }
  const text = await metrics.render();
  res.setHeader("content-type", "text/plain; version=0.0.4; charset=utf-8");
  res.setHeader("content-length", Buffer.byteLength(text));
  res.statusCode = 200;
  res.end(text);
}
