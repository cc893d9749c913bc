import { ApiKeyService } from "../gen/internal/v1/api_keys_pb.ts";
import { IngestService } from "../gen/internal/v1/ingest_pb.ts";
import { PartnerService } from "../gen/internal/v1/partners_pb.ts";
import { PortalAdminService } from "../gen/internal/v1/portal_admin_pb.ts";
import { SandboxAdminService } from "../gen/internal/v1/sandbox_admin_pb.ts";
import { SigningKeyService } from "../gen/internal/v1/signing_keys_pb.ts";
import { ConsentAdminService, UserService } from "../gen/internal/v1/users_pb.ts";
import { ApiKeyService as PartnerApiKeyService } from "../gen/partner/v1/api_keys_pb.ts";
import { ConsentService } from "../gen/partner/v1/consents_pb.ts";
import { DisbursementService } from "../gen/partner/v1/disbursements_pb.ts";
import { KeysService } from "../gen/partner/v1/keys_pb.ts";
import { SandboxService } from "../gen/partner/v1/sandbox_pb.ts";
import { SnapshotService } from "../gen/partner/v1/snapshots_pb.ts";
import { WebhookService } from "../gen/partner/v1/webhooks_pb.ts";
import { createApiKeyHandlers } from "./apikeys/api-key.handlers.ts";
import { createPartnerApiKeyHandlers } from "./apikeys/partner-api-key.handlers.ts";
import type { Config } from "./config.ts";
import {
  createConsentAdminHandlers,
  createConsentHandlers,
  createUserHandlers,
} from "./consent/consent.handlers.ts";
import { createDisbursementHandlers } from "./disbursements/disbursement.handlers.ts";
import { PAYSTACK_WEBHOOK_PATH, type ProviderWebhooks } from "./disbursements/provider-webhooks.ts";
import { docsPaths, loadDocs } from "./docs/reference.ts";
import { createPartnerHandlers } from "./partners/partner.handlers.ts";
import type { Clock } from "./platform/clock.ts";
import { constantTimeEqualStrings } from "./platform/crypto/tokens.ts";
import type { Em, Orm } from "./platform/db/orm.ts";
import { ApiError } from "./platform/errors.ts";
import { failpoint } from "./platform/failpoints.ts";
import { createCors } from "./platform/http/cors.ts";
import { type Handler, type Listener, listen } from "./platform/http/listener.ts";
import { requestScope } from "./platform/http/request-scope.ts";
import { type AnyResponse, writeJson, writeRestError } from "./platform/http/rest-errors.ts";
import {
  type AnyRequest,
  createTranscoder,
  readBody,
  routeLabelOf,
  type ServiceBinding,
} from "./platform/http/transcoder.ts";
import { newId } from "./platform/ids.ts";
import type { Logger } from "./platform/logger.ts";
import type { Metrics } from "./platform/metrics.ts";
import { requestValues } from "./platform/rpc/context.ts";
import { createInternalEdge, createPartnerEdge, type Edge, replayable } from "./platform/rpc/edge.ts";
import { toApiError } from "./platform/rpc/errors.ts";
import { edgeInterceptor } from "./platform/rpc/interceptor.ts";
import { connectAdapter } from "./platform/rpc/node-adapter.ts";
import { precheckTable } from "./platform/rpc/prechecks.ts";
import { createReflection, reflectionServices } from "./platform/rpc/reflection.ts";
import { compileRequestRules } from "./platform/rpc/validation.ts";
import { createPortalEdge } from "./portal/portal.edge.ts";
import { PORTAL_PROCEDURES, portalConnectServices } from "./portal/portal.services.ts";
import { createPortalAdminHandlers } from "./portal/portal-admin.handlers.ts";
import { loadPortalAssets, PORTAL_PREFIX } from "./portal/web-assets.ts";
import type { AddressGuard } from "./ratelimit/address-guard.ts";
import { createSandboxHandlers } from "./sandbox/sandbox.handlers.ts";
import { createSandboxAdminHandlers } from "./sandbox/sandbox-admin.handlers.ts";
import type { Services } from "./services.ts";
import { createKeysHandlers, createSigningKeyAdminHandlers } from "./signing/keys.handlers.ts";
import { createIngestHandlers, createSnapshotHandlers } from "./snapshot/snapshot.handlers.ts";
import { createWebhookPrechecks } from "./webhooks/webhook.prechecks.ts";
import { createWebhookHandlers } from "./webhooks/webhooks.handlers.ts";

const MAX_BODY_BYTES = 1024 * 1024;
const REQUEST_ID = Symbol("requestId");
type Tagged = { [REQUEST_ID]?: string };
const requestIdOf = (req: unknown) => (req as Tagged)[REQUEST_ID] ?? newId("req");

/**
 * Wraps a listener's handler: a fresh `req_` id on every response, before anything else can fail, and one
 * access-log line per request (debug level; no query strings, no headers, no page tokens, so no secrets or
 * personal data).
 * A client's own X-Request-Id is never taken as ours; it is logged as `clientRequestId`.
 */
const STARTED = Symbol("started");
/** The methods any route serves; every other is 405 before a handler sees it. */
const HTTP_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
type Timed = { [STARTED]?: number };
/** Set on a request that took a failure's token from its address's bucket on arrival. */
const RESERVED = Symbol("reserved");
type Reserved = { [RESERVED]?: boolean };

function withRequestId(
  handler: Handler,
  logger: Logger,
  listener: string,
  metrics: Metrics,
  guard?: AddressGuard,
  /** True for a request whose API key this instance already knows as a partner's (no query to tell). */
  knownKey?: (authorization: string | undefined) => boolean,
): Handler {
  const logRequests = logger.level === "debug";
  // One shared listener, not a closure per request: this runs on every request.
  function finished(this: AnyResponse & Timed & { req: AnyRequest }) {
    const seconds = (performance.now() - (this[STARTED] ?? 0)) / 1000;
    const req = this.req;
    const url = req.url ?? "";
    const q = url.indexOf("?");
    const path = q === -1 ? url : url.slice(0, q);
    const { face, route } = routeOf(req, path, this.statusCode);
    metrics.http.record(listener, face, route, req.method ?? "", this.statusCode, seconds);
    // A failed authentication is charged to the client's address (see the guard below): a request that took a
    // token on arrival keeps it spent when it failed and gives it back otherwise.
    if (guard) {
      const reserved = (req as Reserved)[RESERVED];
      if (reserved && this.statusCode !== 401) guard.refund(req.socket?.remoteAddress ?? "");
      else if (!reserved && this.statusCode === 401) guard.failed(req.socket?.remoteAddress ?? "");
    }
    if (logRequests) {
      const client = req.headers["x-request-id"];
      logger.debug("request", {
        listener,
        requestId: requestIdOf(req),
        clientRequestId: typeof client === "string" ? client.slice(0, 128) : undefined,
        method: req.method,
        // A hosted page's path is its credential (a consent link, a mandate, a prompt session): its template only.
        path: face === "page" ? route : path.slice(0, 256),
        status: this.statusCode,
        ms: Math.round(seconds * 10_000) / 10,
      });
    }
  }
  return (req, res) => {
    const id = newId("req");
    (req as Tagged)[REQUEST_ID] = id;
    res.setHeader("x-request-id", id);
    // No answer of either listener is ever to be sniffed as another type (an error body as HTML, say).
    res.setHeader("x-content-type-options", "nosniff");
    (res as Timed)[STARTED] = performance.now();
    res.on("finish", finished); // fires once; `on` avoids the wrapper `once` allocates
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
    if (guard) {
      // Traffic no API key limits (CONTRACT.md §8): the hosted pages, and an address that keeps failing to
      // authenticate, are limited per client address before anything costs a query.
      const path = (req.url ?? "").split("?")[0] ?? "";
      const address = req.socket?.remoteAddress ?? "";
      const page = PAGE_PREFIXES.some((prefix) => path.startsWith(prefix));
      // A request that will authenticate takes a failure's token on arrival, given back when it does not fail:
      // a burst of guesses sent at once cannot all pass the check before the first is charged (they would each
      // cost a query, and hold the pool), whatever the bucket had refilled to.
      const decision = page
        ? guard.takePage(address)
        : FIXED_PATHS.has(path)
          ? undefined
          : guard.reserveFailure(address);
      // An address over its budget of failures (guessed keys, a shared proxy) still lets through a request
      // whose key is one this instance already knows: another client's guesses never lock a partner out.
      if (decision && !decision.allowed && !page && knownKey?.(req.headers.authorization)) {
        // admitted: the full authentication still runs
      } else if (decision && !decision.allowed) {
        return writeRestError(
          res,
          new ApiError(
            "rate_limited",
            page
              ? "Too many requests from your address; try again shortly."
              : "Too many failed authentications from your address; try again shortly.",
            { retryAfterSeconds: decision.retryAfterSeconds },
          ),
          id,
        );
      } else if (decision && !page) (req as Reserved)[RESERVED] = true;
    }
    requestScope.run(id, handler, req, res);
  };
}

const PROCEDURE = /^\/[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*\.[A-Z][A-Za-z0-9]*\/[A-Z][A-Za-z0-9]*$/;
/** The hosted pages: no API key, so limited per client address. */
const PAGE_PREFIXES = ["/consent/", "/mandate/", "/prompt/"];
const FIXED_PATHS = new Set([
  "/healthz",
  "/readyz",
  "/metrics",
  docsPaths.openapi,
  docsPaths.reference,
  PAYSTACK_WEBHOOK_PATH,
]);

/** A bounded route label (a template, a procedure or a fixed path; never an id) and the face it came in on. */
function routeOf(req: AnyRequest, path: string, status: number): { face: string; route: string } {
  const type = String(req.headers["content-type"] ?? "");
  const rest = routeLabelOf(req);
  if (rest) return { face: "rest", route: rest };
  if (path.startsWith("/partner/")) return { face: "rest", route: "unmatched" };
  if (path.startsWith("/consent/")) return { face: "page", route: "/consent/{token}" };
  if (path.startsWith("/mandate/")) return { face: "page", route: "/mandate/{token}" };
  if (path.startsWith("/prompt/")) return { face: "page", route: "/prompt/{token}" };
  if (path.startsWith(`${PORTAL_PREFIX}/assets/`)) return { face: "page", route: "/portal/assets/{file}" };
  if (path === PORTAL_PREFIX || path.startsWith(`${PORTAL_PREFIX}/`))
    return { face: "page", route: "/portal" };
  if (FIXED_PATHS.has(path)) return { face: "http", route: path };
  const face = type.startsWith("application/grpc-web")
    ? "grpc-web"
    : type.startsWith("application/grpc")
      ? "grpc"
      : "connect";
  return { face, route: PROCEDURE.test(path) && status !== 404 ? path : "unmatched" };
}

/** Connect, gRPC-Web and gRPC for a set of services, behind the edge (reflection stays public if listed). */
function connectHandler(services: ServiceBinding[], edge: Edge, logger: Logger, publicServices: string[]) {
  const guarded = edgeInterceptor(edge, logger);
  return connectAdapter({
    routes: (router) => {
      for (const { service, impl } of services) router.service(service, impl as never);
    },
    interceptors: [
      (next) => (req) => (publicServices.includes(req.service.typeName) ? next(req) : guarded(next)(req)),
    ],
    contextValues: (req) => requestValues(requestIdOf(req), req),
    jsonOptions: { alwaysEmitImplicit: true },
    readMaxBytes: MAX_BODY_BYTES,
    fallback: (req, res) => {
      writeRestError(res, new ApiError("not_found", `No route ${req.method} ${req.url}.`), requestIdOf(req));
    },
    requestIdOf,
    onError: (message, err) => logger.error(message, { err }),
  });
}

/** The services, and reflection over them under both of its names (`v1` and `v1alpha`). */
const withReflection = (list: ServiceBinding[]): ServiceBinding[] => {
  const impl = createReflection(list.map((s) => s.service)) as never;
  return [...list, ...reflectionServices.map((service) => ({ service, impl }))];
};

/** The partner services, each implemented once and served on every face. */
export function partnerServices(services: Services, clock: Clock): ServiceBinding[] {
  return [
    { service: KeysService, impl: createKeysHandlers(services.signingKeys) as never },
    {
      // Portal sessions only: an API key is refused (docs/portal.md).
      service: PartnerApiKeyService,
      impl: replayable(createPartnerApiKeyHandlers(services.apiKeys, clock)) as never,
    },
    {
      service: WebhookService,
      impl: replayable(createWebhookHandlers(services.webhooks, services.deliveries)) as never,
    },
    {
      service: SnapshotService,
      impl: createSnapshotHandlers(services.snapshots, services.snapshotReads, services.metrics) as never,
    },
    {
      service: DisbursementService,
      impl: replayable(
        createDisbursementHandlers(services.disbursements, services.repayments, services.books),
      ) as never,
    },
    {
      service: ConsentService,
      impl: replayable(createConsentHandlers(services.consents, services.consentLinks)) as never,
    },
    {
      service: SandboxService,
      impl: replayable(createSandboxHandlers(services.sandbox, services.disbursements)) as never,
    },
  ];
}

/** Options for {@link startListeners}. */
export interface ListenerOptions {
  config: Readonly<Config>;
  services: Services;
  clock: Clock;
  logger: Logger;
  internalToken: string;
  ready: () => Promise<boolean>;
  orm: Orm;
  /** Serve the partner listener (roles `api` and `all`); a `worker` serves only the internal one (metrics, health). */
  partner: boolean;
}

/**
 * The payment provider's webhook: 200 once verified and recorded (or knowingly ignored), 401 for a bad
 * signature, 500 when the outcome could not be learnt or recorded, so the provider sends it again.
 */
async function receiveProviderWebhook(
  em: Em,
  webhooks: ProviderWebhooks,
  req: AnyRequest,
  res: AnyResponse,
  requestId: string,
  logger: Logger,
): Promise<void> {
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
function serveDocs(req: AnyRequest, res: AnyResponse, pathOnly: string, requestId: string): void {
  if (req.method !== "GET" && req.method !== "HEAD") {
    writeRestError(res, new ApiError("method_not_allowed", "Use GET."), requestId);
    return;
  }
  const html = pathOnly === docsPaths.reference;
  const body = html ? docs.html : docs.json;
  res.setHeader("content-type", html ? "text/html; charset=utf-8" : "application/json; charset=utf-8");
  res.setHeader("cache-control", "public, max-age=300");
  if (html) res.setHeader("content-security-policy", "default-src 'none'; style-src 'unsafe-inline'");
  res.setHeader("content-length", Buffer.byteLength(body));
  res.statusCode = 200;
  res.end(req.method === "HEAD" ? "" : body);
}

/** `/healthz` (the process is up) and `/readyz` (its database answers); false when the URL is neither. */
function serveHealth(url: string, res: AnyResponse, ready: () => Promise<boolean>): boolean {
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
async function serveMetrics(
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

/** The partner listener (REST, Connect, gRPC-Web, gRPC, health) and the internal listener. */
export async function startListeners(o: ListenerOptions) {
  const { config, services, logger } = o;
  const partnerList = partnerServices(services, o.clock);
  const portalList = portalConnectServices(services.portal);
  // Only where partners call: a worker serves no partner request.
  if (o.partner) compileRequestRules([...partnerList, ...portalList].map((b) => b.service));
  const partnerEdge = createPartnerEdge({
    ...services,
    orm: o.orm,
    portal: services.portal.gate,
    sessionOnly: new Set([PartnerApiKeyService.typeName]),
    prechecks: precheckTable(WebhookService, createWebhookPrechecks(services.webhooks)),
  });
  // The portal's own services: same listener, their own edge (never an API key), never CORS.
  const portalConnect = connectHandler(
    portalList,
    createPortalEdge({
      orm: o.orm,
      sessions: services.portal.sessions,
      publicUrl: services.portal.publicUrl,
      publicUrlFixed: services.portal.publicUrlFixed,
      rateLimiter: services.rateLimiter,
      buckets: config.rateLimits,
    }),
    logger,
    [],
  );
  const transcoder = createTranscoder({
    services: partnerList,
    edge: partnerEdge,
    logger,
    maxBodyBytes: MAX_BODY_BYTES,
  });
  const partnerConnect = connectHandler(
    withReflection(partnerList),
    partnerEdge,
    logger,
    reflectionServices.map((s) => s.typeName),
  );
  const cors = createCors(config.corsOrigins);
  const portalAssets = loadPortalAssets();
  /** Answers a page request whose handler failed unexpectedly (never leaves it hanging, never crashes). */
  const pageFailed = (req: AnyRequest, res: AnyResponse, err: unknown) => {
    logger.error("page failed", { err, requestId: requestIdOf(req) });
    if (res.headersSent) return void res.end("");
    writeRestError(res, new ApiError("internal"), requestIdOf(req));
  };
  const partner = !o.partner
    ? undefined
    : await listen({
        name: "partner",
        host: config.host,
        port: config.port,
        logger,
        timeouts: config.http,
        connections: config.connections,
        onRefused: (reason) => services.metrics.connectionsRefused.inc({ listener: "partner", reason }),
        onEvicted: () => services.metrics.connectionsEvicted.inc({ listener: "partner" }),
        handler: withRequestId(
          (req, res) => {
            const url = req.url ?? "/";
            // Browser clients of the API (REST, Connect, gRPC-Web, the OpenAPI document) from listed origins;
            // never the hosted pages, which are forms of their own.
            if (url.startsWith(PORTAL_PROCEDURES)) return portalConnect(req as never, res as never);
            if ((url.startsWith("/partner/") || PROCEDURE.test(url.split("?")[0] ?? "")) && cors(req, res))
              return;
            if (url.startsWith(docsPaths.openapi) || url.startsWith(docsPaths.reference)) {
              const pathOnly = url.split("?")[0] ?? "";
              if (pathOnly === docsPaths.openapi || pathOnly === docsPaths.reference)
                return serveDocs(req, res, pathOnly, requestIdOf(req));
            }
            if (url.startsWith("/partner/")) return void transcoder.handle(req, res, requestIdOf(req));
            if (url.startsWith(PORTAL_PREFIX) && portalAssets.serve(req, res, requestIdOf(req))) return;
            // The pages answer their own errors; a rejection that escapes them is answered 500 here, so no
            // request can bring the process down.
            if (url.startsWith("/consent/"))
              return void services.pages
                .handle(services.consentFlow, o.orm.em.fork(), req, res, requestIdOf(req))
                .catch((err: unknown) => pageFailed(req, res, err));
            if (url.startsWith("/mandate/"))
              return void services.pages
                .handle(services.mandateFlow, o.orm.em.fork(), req, res, requestIdOf(req))
                .catch((err: unknown) => pageFailed(req, res, err));
            if (url.startsWith("/prompt/"))
              return void services.pages
                .prompt(o.orm.em.fork(), req, res, requestIdOf(req), services.openPrompt)
                .catch((err: unknown) => pageFailed(req, res, err));
            if (url === PAYSTACK_WEBHOOK_PATH && services.providerWebhooks.enabled())
              return void receiveProviderWebhook(
                o.orm.em.fork(),
                services.providerWebhooks,
                req,
                res,
                requestIdOf(req),
                logger,
              );
            if (serveHealth(url, res, o.ready)) return;
            partnerConnect(req as never, res as never);
          },
          logger,
          "partner",
          services.metrics,
          services.addressGuard,
          (authorization) => services.apiKeys.knows(authorization),
        ),
      });

  const internalList: ServiceBinding[] = [
    { service: PartnerService, impl: createPartnerHandlers(services.partners, services.limits) as never },
    {
      service: ApiKeyService,
      impl: createApiKeyHandlers(services.apiKeys, o.clock, services.limits) as never,
    },
    { service: SigningKeyService, impl: createSigningKeyAdminHandlers(services.signingKeys) as never },
    { service: UserService, impl: createUserHandlers(services.users, services.instruments) as never },
    { service: IngestService, impl: createIngestHandlers(services.ledger, services.standing) as never },
    {
      service: ConsentAdminService,
      impl: createConsentAdminHandlers(
        services.consents,
        services.users,
        services.consentLinks,
        services.mandates,
      ) as never,
    },
    {
      service: PortalAdminService,
      impl: createPortalAdminHandlers(
        services.portal.people,
        services.portal.audit,
        services.partners,
      ) as never,
    },
    {
      service: SandboxAdminService,
      impl: createSandboxAdminHandlers(services.sandbox, services.fixtures, services.partners) as never,
    },
  ];
  const internalConnect = connectHandler(
    withReflection(internalList),
    createInternalEdge(o.internalToken, o.orm),
    logger,
    [],
  );
  let internal: Listener;
  try {
    internal = await listen({
      name: "internal",
      host: config.internalHost,
      port: config.internalPort,
      logger,
      timeouts: config.http,
      // No cap per address: its callers are the operator's own services and scrapers, often behind one address.
      connections: { max: config.connections.max, maxPerAddress: 0 },
      onRefused: (reason) => services.metrics.connectionsRefused.inc({ listener: "internal", reason }),
      onEvicted: () => services.metrics.connectionsEvicted.inc({ listener: "internal" }),
      handler: withRequestId(
        (req, res) => {
          if ((req.url ?? "").split("?")[0] === "/metrics")
            return void serveMetrics(req, res, services.metrics, o.internalToken);
          if (serveHealth(req.url ?? "", res, o.ready)) return;
          internalConnect(req as never, res as never);
        },
        logger,
        "internal",
        services.metrics,
      ),
    });
  } catch (err) {
    await partner?.close();
    throw err;
  }
  services.metrics.gauge("http_connections_open", "Connections open now, by listener.", async () => [
    ...(partner ? [{ labels: { listener: "partner" }, value: partner.openConnections }] : []),
    { labels: { listener: "internal" }, value: internal.openConnections },
  ]);
  const hostFor = (h: string) =>
    h === "0.0.0.0" || h === "::" ? "127.0.0.1" : h.includes(":") ? `[${h}]` : h;
  const partnerUrl = partner ? `http://${hostFor(partner.host)}:${partner.port}` : undefined;
  const internalUrl = `http://${hostFor(internal.host)}:${internal.port}`;
  logger.info("listening", { partner: partnerUrl, internal: internalUrl });
  return {
    partnerUrl,
    internalUrl,
    routes: transcoder.routes,
    close: () => Promise.all([partner?.close(), internal.close()]).then(() => undefined),
  };
}
