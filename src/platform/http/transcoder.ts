import { ApiError } from "../errors.ts";
import type { Logger } from "../logger.ts";
import { kOutcome, requestValues } from "../rpc/context.ts";
import { toApiError } from "../rpc/errors.ts";
import type { Edge } from "../rpc/pipeline.ts";
import { type AnyRequest, bodyToCome } from "./request-body.ts";
import { headersOf, RestContext } from "./rest-context.ts";
import { type AnyResponse, writeRestError } from "./rest-errors.ts";
import { decodeRequest, requestJson } from "./rest-request.ts";
import { writeRestResponse } from "./rest-response.ts";
import {
  buildRoutes,
  type Route,
  routeIndex,
  type ServiceBinding,
  splitTarget,
  wellEncoded,
} from "./rest-routes.ts";

// The REST face in parts: which route a request is for (rest-routes.ts), its body (request-body.ts), the request
// message read from body, query and path (rest-request.ts), the handler's context (rest-context.ts), the
// response (rest-response.ts) and the error body (rest-errors.ts). This module ties them together.
export { type AnyRequest, decodeContent, readBody } from "./request-body.ts";
export type { ServiceBinding } from "./rest-routes.ts";

/** Options for {@link createTranscoder}. */
export interface TranscoderOptions {
  services: ServiceBinding[];
  edge: Edge;
  logger: Logger;
  /** Largest accepted request body. */
  maxBodyBytes: number;
}

/** The REST face: routes `/partner/v1/...` by the `google.api.http` options to the Connect implementations. */
export interface Transcoder {
  handle(req: AnyRequest, res: AnyResponse, requestId: string): Promise<void>;
  /** Every route, as `VERB template`, for documentation and tests. */
  readonly routes: readonly string[];
}

/** What serving one routed call needs of the transcoder. */
interface CallDeps {
  edge: Edge;
  logger: Logger;
  maxBodyBytes: number;
}

const ROUTE = Symbol("route");
type Routed = { [ROUTE]?: string };

/**
 * The route template the REST face matched for a request, for metrics and access logs. A symbol property, like
 * the request id the listener sets: a WeakMap entry per request costs a hash insert and ephemeron work in
 * every young-generation collection.
 */
export const routeLabelOf = (req: object): string | undefined => (req as Routed)[ROUTE];

/** Runs the route's handler through the edge (key, limits, idempotency) and returns what it answered. */
async function callHandler(
  deps: CallDeps,
  req: AnyRequest,
  route: Route,
  ctx: RestContext,
  search: string,
  vars: Record<string, string>,
): Promise<unknown> {
  const call = {
    method: route.method,
    requestHeader: ctx.requestHeader,
    values: ctx.values,
    responseHeader: ctx.responseHeader,
  };
  // A request whose body is still to come (HTTP/1.1 with a length or chunks; any HTTP/2 stream) is admitted
  // now, so a bad key costs no body, and confirmed once the body is in (Edge.confirm).
  const confirmAfterBody = bodyToCome(req);
  await deps.edge.admit(call);
  const query = search === "" ? undefined : new URLSearchParams(search);
  const json = await requestJson(req, route, vars, query, deps.maxBodyBytes);
  if (confirmAfterBody) await deps.edge.confirm?.(call);
  const request = decodeRequest(route.method.input, json);
  return deps.edge.invoke(call, request, async () => route.fn(request, ctx));
}

/** Serves a request its route matched: the handler's answer, or the error as the REST face writes errors. */
async function serveRoute(
  deps: CallDeps,
  req: AnyRequest,
  res: AnyResponse,
  route: Route,
  requestId: string,
  search: string,
  vars: Record<string, string>,
): Promise<void> {
  const values = requestValues(requestId, req);
  const ctx = new RestContext(route, `http://localhost${req.url ?? "/"}`, headersOf(req), values);
  // The handler's signal fires when the client goes away mid-request (not after every request: creating
  // the abort reason costs as much as the rest of a cached read).
  const onClose = () => {
    if (!res.writableEnded) ctx.abort();
  };
  res.on("close", onClose);
  try {
    const output = await callHandler(deps, req, route, ctx, search, vars);
    writeRestResponse(res, route, ctx.responseHeader, output);
  } catch (err) {
    const error = toApiError(err, deps.logger.child({ requestId }));
    const outcome = values.get(kOutcome);
    if (outcome) outcome.error = error;
    writeRestError(res, error, requestId, ctx.responseHeader);
  } finally {
    res.off("close", onClose);
  }
}

/**
 * Finds the request's route and serves it; a path no route matches is `404 not_found`, a path matched only
 * under other verbs `405 method_not_allowed` with `Allow`.
 */
async function dispatch(
  deps: CallDeps,
  candidates: (path: string) => Route[],
  req: AnyRequest,
  res: AnyResponse,
  requestId: string,
): Promise<void> {
  const url = splitTarget(req.url ?? "/");
  // A path whose percent-encoding is not UTF-8 (`%zz`, `%E0%A4%A`) names nothing: it is refused as such, on
  // every route, rather than read as an id that happens to hold a percent sign.
  if (url.pathname.includes("%") && !wellEncoded(url.pathname)) {
    req.resume();
    return writeRestError(
      res,
      new ApiError("invalid_argument", "The path's percent-encoding is not valid UTF-8."),
      requestId,
    );
  }
  let allowed: string[] = [];
  // HEAD is GET without the body (Node writes none for a HEAD request): the same headers, length included.
  const verb = req.method === "HEAD" ? "GET" : req.method;
  for (const route of candidates(url.pathname)) {
    const vars = route.template.match(url.pathname);
    if (!vars) continue;
    if (route.binding.verb === verb) {
      (req as Routed)[ROUTE] = route.binding.template;
      return serveRoute(deps, req, res, route, requestId, url.search, vars);
    }
    allowed.push(route.binding.verb);
    if (route.binding.verb === "GET") allowed.push("HEAD");
  }
  // Drain what the client sent so the connection can be reused.
  req.resume();
  if (allowed.length > 0) {
    allowed = [...new Set(allowed)];
    res.setHeader("allow", allowed.join(", "));
    return writeRestError(
      res,
      new ApiError("method_not_allowed", `Use ${allowed.join(" or ")} on ${url.pathname}.`),
      requestId,
    );
  }
  writeRestError(res, new ApiError("not_found", `No route ${req.method} ${url.pathname}.`), requestId);
}

/** Creates the REST transcoder over the given services. */
export function createTranscoder({ services, edge, logger, maxBodyBytes }: TranscoderOptions): Transcoder {
  const routes = buildRoutes(services);
  const candidates = routeIndex(routes);
  const deps: CallDeps = { edge, logger, maxBodyBytes };
  return {
    routes: routes.map((r) => `${r.binding.verb} ${r.binding.template}`),
    handle: (req, res, requestId) => dispatch(deps, candidates, req, res, requestId),
  };
}
