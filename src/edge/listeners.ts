import { ApiKeyService as PartnerApiKeyService } from "../../gen/partner/v1/api_keys_pb.ts";
import { RequestLogService } from "../../gen/partner/v1/requests_pb.ts";
import { WebhookService } from "../../gen/partner/v1/webhooks_pb.ts";
import type { Clock } from "../platform/clock.ts";
import type { Orm } from "../platform/db/orm.ts";
import type { Replicas } from "../platform/db/replicas.ts";
import { type Listener, listen } from "../platform/http/listener.ts";
import { createTranscoder } from "../platform/http/transcoder.ts";
import type { Logger } from "../platform/logger.ts";
import { precheckTable } from "../platform/rpc/prechecks.ts";
import { reflectionServices } from "../platform/rpc/reflection.ts";
import { tracedEdge } from "../platform/rpc/traced-edge.ts";
import type { RequestLogWriter } from "../requestlog/request-log.writer.ts";
import { createWebhookPrechecks } from "../webhooks/webhook.prechecks.ts";
import { internalServices, partnerServices, portalServices } from "./bindings.ts";
import { connectHandler, MAX_BODY_BYTES, withReflection } from "./connect.ts";
import type { EdgeServices, ListenerConfig } from "./dependencies.ts";
import { serveHealth, serveMetrics } from "./fixed-routes.ts";
import { createInternalEdge } from "./internal-edge.ts";
import { createPartnerEdge } from "./partner-edge.ts";
import { partnerRoutes } from "./partner-routes.ts";
import { createPortalEdge } from "./portal-edge.ts";
import { withRequestId } from "./request-id.ts";
import { compileRequestRules, validateRequest } from "./validation.ts";

/** Options for {@link startListeners}. */
export interface ListenerOptions {
  config: Readonly<ListenerConfig>;
  services: EdgeServices;
  clock: Clock;
  logger: Logger;
  internalToken: string;
  ready: () => Promise<boolean>;
  orm: Orm;
  /** Streaming replicas for partner reads, when DATABASE_REPLICA_URLS names any. */
  replicas?: Replicas;
  /** Serve the partner listener (roles `api` and `all`); a `worker` serves only the internal one (metrics, health). */
  partner: boolean;
  /** Where the calls made with partners' keys are logged (REQUEST_LOG). */
  requestLog?: RequestLogWriter;
}

/** The partner listener: REST, Connect, gRPC-Web and gRPC for partners, the portal, the hosted pages. */
async function startPartnerListener(
  o: ListenerOptions,
): Promise<{ listener: Listener; routes: readonly string[] }> {
  const { config, services, logger, orm } = o;
  const partnerList = partnerServices(services, o.clock);
  const portalList = portalServices(services.portal);
  compileRequestRules([...partnerList, ...portalList].map((b) => b.service));
  const edge = tracedEdge(
    createPartnerEdge({
      ...services,
      orm,
      replicas: o.replicas,
      portal: services.portal.gate,
      sessionOnly: new Set([PartnerApiKeyService.typeName, RequestLogService.typeName]),
      prechecks: precheckTable(WebhookService, createWebhookPrechecks(services.webhooks)),
      validate: validateRequest,
    }),
  );
  // The portal's own services: same listener, their own edge (never an API key), never CORS.
  const portalEdge = tracedEdge(
    createPortalEdge({
      orm,
      sessions: services.portal.sessions,
      publicUrl: services.portal.publicUrl,
      publicUrlFixed: services.portal.publicUrlFixed,
      rateLimiter: services.rateLimiter,
      buckets: config.rateLimits,
      validate: validateRequest,
    }),
  );
  const rest = createTranscoder({ services: partnerList, edge, logger, maxBodyBytes: MAX_BODY_BYTES });
  const routes = partnerRoutes({
    services,
    orm,
    logger,
    corsOrigins: config.corsOrigins,
    ready: o.ready,
    rest,
    connect: connectHandler(
      withReflection(partnerList),
      edge,
      logger,
      reflectionServices.map((s) => s.typeName),
    ),
    portalConnect: connectHandler(portalList, portalEdge, logger),
  });
  const listener = await listen({
    name: "partner",
    host: config.host,
    port: config.port,
    logger,
    timeouts: config.http,
    connections: config.connections,
    onRefused: (reason) => services.metrics.connectionsRefused.inc({ listener: "partner", reason }),
    onEvicted: () => services.metrics.connectionsEvicted.inc({ listener: "partner" }),
    handler: withRequestId(routes, {
      logger,
      listener: "partner",
      metrics: services.metrics,
      addresses: {
        guard: services.addressGuard,
        knownKey: (authorization) => services.apiKeys.knows(authorization),
      },
      requests: o.requestLog,
    }),
  });
  return { listener, routes: rest.routes };
}

/** The internal listener: the operator's services behind the service token, `/metrics`, health. */
function startInternalListener(o: ListenerOptions): Promise<Listener> {
  const { config, services, logger } = o;
  const connect = connectHandler(
    withReflection(internalServices(services, o.clock)),
    tracedEdge(createInternalEdge(o.internalToken, o.orm, validateRequest)),
    logger,
  );
  return listen({
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
        connect(req, res);
      },
      { logger, listener: "internal", metrics: services.metrics },
    ),
  });
}

/** The URL a listener's clients on this machine reach it at. */
const urlOf = (l: Listener) => {
  const h = l.host;
  const host = h === "0.0.0.0" || h === "::" ? "127.0.0.1" : h.includes(":") ? `[${h}]` : h;
  return `http://${host}:${l.port}`;
};

/** The partner listener (roles `api` and `all`) and the internal listener (every role). */
export async function startListeners(o: ListenerOptions) {
  const { services, logger } = o;
  // Only where partners call: a worker serves no partner request.
  const started = o.partner ? await startPartnerListener(o) : undefined;
  const partner = started?.listener;
  let internal: Listener;
  try {
    internal = await startInternalListener(o);
  } catch (err) {
    await partner?.close();
    throw err;
  }
  services.metrics.gauge("http_connections_open", "Connections open now, by listener.", async () => [
    ...(partner ? [{ labels: { listener: "partner" }, value: partner.openConnections }] : []),
    { labels: { listener: "internal" }, value: internal.openConnections },
  ]);
  const partnerUrl = partner ? urlOf(partner) : undefined;
  const internalUrl = urlOf(internal);
  logger.info("listening", { partner: partnerUrl, internal: internalUrl });
  return {
    partnerUrl,
    internalUrl,
    /** The REST routes the partner listener serves (none on a worker). */
    routes: started?.routes ?? [],
    close: () => Promise.all([partner?.close(), internal.close()]).then(() => undefined),
  };
}
