import { createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { PgBoss } from "pg-boss";
import { ServerReflection } from "../gen/grpc/reflection/v1/reflection_pb.ts";
import { ApiKeyService } from "../gen/internal/v1/api_keys_pb.ts";
import { PartnerService } from "../gen/internal/v1/partners_pb.ts";
import { SigningKeyService } from "../gen/internal/v1/signing_keys_pb.ts";
import { KeysService } from "../gen/partner/v1/keys_pb.ts";
import { createApiKeyHandlers } from "./apikeys/api-key.handlers.ts";
import { createApiKeyService } from "./apikeys/api-key.service.ts";
import type { Config } from "./config.ts";
import { createPartnerHandlers } from "./partners/partner.handlers.ts";
import { createPartnerService } from "./partners/partner.service.ts";
import { type Clock, systemClock } from "./platform/clock.ts";
import { createSecretBox } from "./platform/crypto/secret-box.ts";
import { startChangeFeed } from "./platform/db/change-feed.ts";
import { createOrm, migrate } from "./platform/db/orm.ts";
import { ApiError } from "./platform/errors.ts";
import { type Handler, type Listener, listen } from "./platform/http/listener.ts";
import { writeJson, writeRestError } from "./platform/http/rest-errors.ts";
import { createTranscoder, type ServiceBinding } from "./platform/http/transcoder.ts";
import { newId } from "./platform/ids.ts";
import { type QueueName, type Queues, runJobNow, startBoss } from "./platform/jobs/boss.ts";
import type { Logger } from "./platform/logger.ts";
import { kRequestId } from "./platform/rpc/context.ts";
import { createInternalEdge, createPartnerEdge, type Edge } from "./platform/rpc/edge.ts";
import { edgeInterceptor } from "./platform/rpc/interceptor.ts";
import { createReflection } from "./platform/rpc/reflection.ts";
import { createRateLimiter } from "./ratelimit/rate-limiter.ts";
import { createKeysHandlers, createSigningKeyAdminHandlers } from "./signing/keys.handlers.ts";
import { registerSigningKeyJobs } from "./signing/signing-key.jobs.ts";
import { createSigningKeyService } from "./signing/signing-key.service.ts";

/** What the composition root needs beyond the configuration. */
export interface AppOptions {
  config: Readonly<Config>;
  /** The resolved database (the embedded one's URL when `config.databaseUrl` is unset). */
  databaseUrl: string;
  masterKey: Buffer;
  internalToken: string;
  logger: Logger;
  clock?: Clock;
}

/** A running service. */
export interface App {
  /** Base URL of the partner listener (REST, Connect, gRPC-Web, gRPC), when this role serves it. */
  readonly partnerUrl: string | undefined;
  /** Base URL of the internal listener, when this role serves it. */
  readonly internalUrl: string | undefined;
  readonly services: ReturnType<typeof createServices>;
  readonly boss: PgBoss;
  /** Sends a job and waits for it to complete. */
  runJob<Q extends QueueName>(name: Q, data: Queues[Q]): Promise<unknown>;
  /** True when the database answers. */
  ready(): Promise<boolean>;
  /** Graceful stop: listeners drain, workers finish, connections close. */
  stop(): Promise<void>;
}

const MAX_BODY_BYTES = 1024 * 1024;
const REQUEST_ID = Symbol("requestId");

type Tagged = { [REQUEST_ID]?: string };

function createServices(
  deps: Omit<Parameters<typeof createApiKeyService>[0], never> & {
    box: ReturnType<typeof createSecretBox>;
    config: Readonly<Config>;
  },
) {
  const { orm, clock, changes, box, config } = deps;
  return {
    partners: createPartnerService({ orm, clock }),
    apiKeys: createApiKeyService({ orm, clock, changes }),
    signingKeys: createSigningKeyService({ orm, clock, box, changes }),
    rateLimiter: createRateLimiter({ orm, limits: config.rateLimits }),
  };
}

/**
 * Wraps a listener's handler: a fresh `req_` id on every response, before anything else can fail, and one
 * access-log line per request (debug level; no query strings, no headers, so no secrets or personal data).
 * A client's own X-Request-Id is never taken as ours; it is logged as `clientRequestId`.
 */
function withRequestId(handler: Handler, logger: Logger, listener: string): Handler {
  const logRequests = logger.level === "debug";
  return (req, res) => {
    const id = newId("req");
    (req as Tagged)[REQUEST_ID] = id;
    res.setHeader("x-request-id", id);
    if (logRequests) {
      const started = performance.now();
      res.once("finish", () => {
        const client = req.headers["x-request-id"];
        logger.debug("request", {
          listener,
          requestId: id,
          clientRequestId: typeof client === "string" ? client.slice(0, 128) : undefined,
          method: req.method,
          path: (req.url ?? "").split("?")[0]?.slice(0, 256),
          status: res.statusCode,
          ms: Math.round((performance.now() - started) * 10) / 10,
        });
      });
    }
    handler(req, res);
  };
}

const requestIdOf = (req: unknown) => (req as Tagged)[REQUEST_ID] ?? newId("req");

function connectHandler(services: ServiceBinding[], edge: Edge, logger: Logger, publicServices: string[]) {
  const guarded = edgeInterceptor(edge, logger);
  return connectNodeAdapter({
    routes: (router) => {
      for (const { service, impl } of services) router.service(service, impl as never);
    },
    interceptors: [
      (next) => (req) => (publicServices.includes(req.service.typeName) ? next(req) : guarded(next)(req)),
    ],
    contextValues: (req) => createContextValues().set(kRequestId, requestIdOf(req)),
    jsonOptions: { alwaysEmitImplicit: true },
    readMaxBytes: MAX_BODY_BYTES,
    fallback: (req, res) => {
      const id = requestIdOf(req);
      writeRestError(res, new ApiError("not_found", `No route ${req.method} ${req.url}.`), id);
    },
  });
}

/** Builds and starts the service for its role. */
export async function createApp(options: AppOptions): Promise<App> {
  const { config, databaseUrl, logger } = options;
  const clock = options.clock ?? systemClock;
  const orm = await createOrm({ databaseUrl, poolSize: config.dbPoolSize, logger });
  const applied = await migrate(orm, databaseUrl);
  if (applied.length) logger.info("applied migrations", { migrations: applied });
  const changes = await startChangeFeed(databaseUrl, logger);
  const box = createSecretBox(options.masterKey);
  const services = createServices({ orm, clock, changes, box, config });
  const serveApi = config.role !== "worker";
  const runWorkers = config.role !== "api";
  const boss = await startBoss({ databaseUrl, logger, supervise: runWorkers });

  const created = await services.signingKeys.maintain();
  if (created.length) logger.info("created signing keys", { kids: created });
  if (runWorkers) await registerSigningKeyJobs(boss, services.signingKeys, logger);

  const ready = async () => {
    try {
      await Promise.race([
        orm.em.getConnection().execute("select 1"),
        new Promise((_, reject) => setTimeout(() => reject(new Error("timeout")), 1_000).unref()),
      ]);
      return true;
    } catch {
      return false;
    }
  };

  const listeners: Listener[] = [];
  let partnerUrl: string | undefined;
  let internalUrl: string | undefined;
  if (serveApi) {
    const reflectionOf = (list: ServiceBinding[]): ServiceBinding => ({
      service: ServerReflection,
      impl: createReflection(list.map((s) => s.service)) as never,
    });
    const partnerServices: ServiceBinding[] = [
      { service: KeysService, impl: createKeysHandlers(services.signingKeys) as never },
    ];
    const partnerEdge = createPartnerEdge({ apiKeys: services.apiKeys, rateLimiter: services.rateLimiter });
    const transcoder = createTranscoder({
      services: partnerServices,
      edge: partnerEdge,
      logger,
      maxBodyBytes: MAX_BODY_BYTES,
    });
    const partnerConnect = connectHandler(
      [...partnerServices, reflectionOf(partnerServices)],
      partnerEdge,
      logger,
      [ServerReflection.typeName],
    );
    const partner = await listen({
      name: "partner",
      host: config.host,
      port: config.port,
      logger,
      handler: withRequestId(
        (req, res) => {
          const url = req.url ?? "/";
          if (url.startsWith("/partner/")) return void transcoder.handle(req, res, requestIdOf(req));
          if (url === "/healthz") return writeJson(res, 200, { status: "ok" });
          if (url === "/readyz") {
            return void ready().then((ok) =>
              writeJson(res, ok ? 200 : 503, { status: ok ? "ready" : "unavailable" }),
            );
          }
          partnerConnect(req as never, res as never);
        },
        logger,
        "partner",
      ),
    });
    listeners.push(partner);

    const internalServices: ServiceBinding[] = [
      { service: PartnerService, impl: createPartnerHandlers(services.partners) as never },
      { service: ApiKeyService, impl: createApiKeyHandlers(services.apiKeys, clock) as never },
      { service: SigningKeyService, impl: createSigningKeyAdminHandlers(services.signingKeys) as never },
    ];
    const internalConnect = connectHandler(
      [...internalServices, reflectionOf(internalServices)],
      createInternalEdge(options.internalToken),
      logger,
      [],
    );
    const internal = await listen({
      name: "internal",
      host: config.internalHost,
      port: config.internalPort,
      logger,
      handler: withRequestId((req, res) => internalConnect(req as never, res as never), logger, "internal"),
    });
    listeners.push(internal);
    const hostFor = (h: string) =>
      h === "0.0.0.0" || h === "::" ? "127.0.0.1" : h.includes(":") ? `[${h}]` : h;
    partnerUrl = `http://${hostFor(partner.host)}:${partner.port}`;
    internalUrl = `http://${hostFor(internal.host)}:${internal.port}`;
    logger.info("listening", { partner: partnerUrl, internal: internalUrl });
  }

  let stopped: Promise<void> | undefined;
  return {
    partnerUrl,
    internalUrl,
    services,
    boss,
    runJob: (name, data) => runJobNow(boss, name, data),
    ready,
    stop() {
      stopped ??= (async () => {
        await Promise.all(listeners.map((l) => l.close()));
        await boss.stop({ graceful: true, timeout: 10_000, close: true });
        await changes.close();
        await orm.close();
      })();
      return stopped;
    },
  };
}
