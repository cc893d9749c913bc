import { type Span, SpanStatusCode } from "@opentelemetry/api";
import { ApiError } from "../platform/errors.ts";
import type { Handler } from "../platform/http/listener.ts";
import { requestScope } from "../platform/http/request-scope.ts";
import { type AnyResponse, restErrorBody, writeRestError } from "../platform/http/rest-errors.ts";
import type { AnyRequest } from "../platform/http/transcoder.ts";
import { newId } from "../platform/ids.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import { outcomeIfAny } from "../platform/rpc/context.ts";
import { inContext, serverSpan, tracingOn } from "../platform/telemetry.ts";
import type { RequestLogWriter } from "../requestlog/request-log.writer.ts";
import { type AddressAdmission, admitAddress, settleAddress } from "./address-guard.ts";
import { routeOf } from "./routes.ts";

// Symbols on the request and response rather than a map keyed by them: this runs on every request.
const REQUEST_ID = Symbol("requestId");
type Tagged = { [REQUEST_ID]?: string };
const STARTED = Symbol("started");
type Timed = { [STARTED]?: number };
const SPAN = Symbol("span");
type Traced = { [SPAN]?: Span };
const ARRIVED = Symbol("arrived");
type Arrived = { [ARRIVED]?: number };

/** The routes of a snapshot read, whose served answers are timed apart (`snapshot_read_duration_seconds`). */
const SNAPSHOT_ROUTES = new Set([
  "/partner/v1/users/{user_id}/snapshot",
  "/partner.v1.SnapshotService/GetSnapshot",
]);
/** Marks when a request's body had arrived whole (a shared listener: `this` is the request). */
function arrivedWhole(this: Arrived) {
  this[ARRIVED] = performance.now();
}

/** The `req_` id given to a request on arrival (a fresh one for a request that never reached the edge). */
export const requestIdOf = (req: unknown): string => (req as Tagged)[REQUEST_ID] ?? newId("req");

/** The methods any route serves; every other is 405 before a handler sees it. */
const HTTP_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/** What {@link withRequestId} records each request in. */
export interface RequestLog {
  logger: Logger;
  listener: string;
  metrics: Metrics;
  /** The partner listener's limits per client address (absent on the internal listener). */
  addresses?: AddressAdmission;
  /** The partners' request log, told of every call made with an API key (absent when REQUEST_LOG is off). */
  requests?: RequestLogWriter;
}

/** Records a finished or abandoned request: its metrics, its address's failure count, and one access-log line (debug). */
function recorder({ logger, listener, metrics, addresses, requests }: RequestLog) {
  const logRequests = logger.level === "debug";
  // One shared listener, not a closure per request: this runs on every request.
  return function finished(this: AnyResponse & Timed & { req: AnyRequest }) {
    const seconds = (performance.now() - (this[STARTED] ?? 0)) / 1000;
    const req = this.req;
    const url = req.url ?? "";
    const q = url.indexOf("?");
    const path = q === -1 ? url : url.slice(0, q);
    const { face, route } = routeOf(req, path, this.statusCode);
    const outcome = outcomeIfAny(req);
    // A gRPC or gRPC-Web error is an HTTP 200 with its code in the trailers: counted as the status the REST face
    // answers for that code, so the 5xx ratio sees every face. A call its client gave up on before the answer
    // was sent is 499 (the client closed it).
    const status = !this.writableEnded ? 499 : (outcome?.error?.httpStatus ?? this.statusCode);
    metrics.http.record(listener, face, route, req.method ?? "", status, seconds);
    const span = (this as Traced)[SPAN];
    if (span) endServerSpan(span, req.method ?? "", route, face, status);
    if (status === 200 && SNAPSHOT_ROUTES.has(route)) {
      const from = (req as Arrived)[ARRIVED] ?? this[STARTED] ?? 0;
      metrics.snapshotReads.observe({ face }, (performance.now() - from) / 1000);
    }
    if (addresses) settleAddress(addresses.guard, req, this.statusCode);
    if (requests && outcome?.keyCaller && this.writableEnded) {
      const { error, keyCaller } = outcome;
      const id = requestIdOf(req);
      requests?.record({
        id,
        partnerId: keyCaller.partnerId,
        environment: keyCaller.environment,
        apiKeyId: keyCaller.keyId,
        method: req.method ?? "",
        route,
        face,
        // A Connect or gRPC error's status is the one the REST face answers for its code.
        status,
        errorCode: error?.code ?? null,
        durationUs: Math.round(seconds * 1e6),
        error: error ? restErrorBody(error, id) : null,
      });
    }
    if (!logRequests) return;
    const client = req.headers["x-request-id"];
    logger.debug("request", {
      listener,
      requestId: requestIdOf(req),
      clientRequestId: typeof client === "string" ? client.slice(0, 128) : undefined,
      method: req.method,
      // A hosted page's path is its credential (a consent link, a mandate, a prompt session): its template only.
      path: face === "page" ? route : path.slice(0, 256),
      status,
      ms: Math.round(seconds * 10_000) / 10,
    });
  };
}

/**
 * Wraps a listener's handler: a fresh `req_` id on every response, before anything else can fail, and one
 * access-log line per request (debug level; no query strings, no headers, no page tokens, so no secrets or
 * personal data). A client's own X-Request-Id is never taken as ours; it is logged as `clientRequestId`.
 * Requests no route could serve (HTTP/1.1 without Host, an unknown method) and, on the partner listener,
 * addresses over their limits are answered here, before any handler.
 */
export function withRequestId(handler: Handler, log: RequestLog): Handler {
  const finished = recorder(log);
  return (req, res) => {
    const id = newId("req");
    (req as Tagged)[REQUEST_ID] = id;
    res.setHeader("x-request-id", id);
    // No answer of either listener is ever to be sniffed as another type (an error body as HTML, say).
    res.setHeader("x-content-type-options", "nosniff");
    (res as Timed)[STARTED] = performance.now();
    // `close` fires once, when the answer is sent or the call is cut short (`finish` never fires for a call its
    // client aborted: its span would never end, its metrics never count). `on` avoids the wrapper `once` allocates.
    res.on("close", finished);
    // A snapshot read's time starts once its body is in (a REST read has none: it starts on arrival).
    if (req.url?.endsWith("/GetSnapshot")) req.on("end", arrivedWhole);
    // HTTP/1.1 requires Host (RFC 9112 §3.2); Node's own refusal had no body, request id or nosniff.
    if (req.httpVersion === "1.1" && req.headers.host === undefined)
      return writeRestError(
        res,
        new ApiError("invalid_request", "An HTTP/1.1 request must carry a Host header."),
        id,
      );
    // HTTP/2 takes any `:method`: one no route serves is refused before any handler (and counted as `other`).
    if (!HTTP_METHODS.has(req.method ?? "")) {
      res.setHeader("allow", [...HTTP_METHODS].join(", "));
      return writeRestError(res, new ApiError("method_not_allowed"), id);
    }
    if (log.addresses && !admitAddress(log.addresses, req, res, id)) return;
    // With tracing on, the request's span (continuing the caller's `traceparent`) holds all its work; off, this
    // costs one flag read.
    const traced = tracingOn
      ? serverSpan(
          req.method ?? "",
          req.headers,
          { "partner_api.request_id": id, "partner_api.listener": log.listener },
          // The operator's internal listener is trusted to continue its own traces; partners' calls are linked.
          log.listener === "internal",
        )
      : undefined;
    if (!traced) return requestScope.run(id, handler, req, res);
    (res as Traced)[SPAN] = traced.span;
    inContext(traced.ctx, () => requestScope.run(id, handler, req, res));
  };
}

/** Names a request's span by its route template (never a raw path: ids stay out of span names) and ends it. */
function endServerSpan(span: Span, method: string, route: string, face: string, status: number): void {
  span.updateName(`${method} ${route}`);
  span.setAttributes({ "http.route": route, "http.response.status_code": status, "partner_api.face": face });
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}
