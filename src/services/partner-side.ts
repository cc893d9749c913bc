import type { AppOptions } from "../app.ts";
import { schema } from "../entities.ts";
import type { Clock } from "../platform/clock.ts";
import type { Orm } from "../platform/db/orm.ts";
import { type Replicas, startReplicas } from "../platform/db/replicas.ts";
import { openRequestLog } from "../requestlog/request-log.ts";
import type { Services } from "../services.ts";

/** What {@link openPartnerSide} is given: the ORM and services built, and where the sessions go. */
export interface PartnerSideDeps {
  orm: Orm;
  services: Services;
  clock: Clock;
  /** DATABASE_URL (the pooler, when DATABASE_DIRECT_URL is set). */
  pooled: string;
  isPooled: boolean;
}

/**
 * What only the processes that answer partners open (roles `api` and `all`): the streaming replicas for their
 * reads, and the request log's writer.
 */
export async function openPartnerSide(
  options: AppOptions,
  deps: PartnerSideDeps,
): Promise<{
  replicas: Replicas | undefined;
  requestLog: Awaited<ReturnType<typeof openRequestLog>> | undefined;
}> {
  const { config, logger } = options;
  if (config.role === "worker") return { replicas: undefined, requestLog: undefined };
  const replicas = await openReplicas(options, deps);
  const requestLog = config.requestLog
    ? await openRequestLog({
        databaseUrl: deps.pooled,
        pooled: deps.isPooled,
        schema,
        timeouts: config.dbTimeouts,
        logger,
        metrics: deps.services.metrics,
        clock: deps.clock,
      })
    : undefined;
  return { replicas, requestLog };
}

/** The streaming replicas for reads, when DATABASE_REPLICA_URLS names any, with their metrics. */
async function openReplicas(options: AppOptions, deps: PartnerSideDeps): Promise<Replicas | undefined> {
  const { config, logger } = options;
  const { orm, services } = deps;
  if (!config.replicaUrls.length) return undefined;
  const replicas = await startReplicas(
    {
      urls: config.replicaUrls,
      schema,
      poolSize: config.dbPoolSize,
      timeouts: config.dbTimeouts,
      maxLagMs: config.replicaMaxLagMs,
      readWaitMs: config.replicaReadWaitMs,
      pooled: deps.isPooled,
      logger,
      onRead: (where) => services.metrics.dbReads.inc(where),
    },
    orm,
  );
  services.metrics.gauge(
    "db_replica_lag_seconds",
    "How far each streaming replica is behind the primary (-1 while it does not answer), as this instance last measured.",
    async () =>
      replicas
        .status()
        .map((r) => ({ labels: { replica: r.name }, value: r.lagMs < 0 ? -1 : r.lagMs / 1000 })),
  );
  services.metrics.gauge(
    "db_replica_healthy",
    "1 while a streaming replica serves reads (answering, replaying, within REPLICA_MAX_LAG_MS), else 0.",
    async () => replicas.status().map((r) => ({ labels: { replica: r.name }, value: r.healthy ? 1 : 0 })),
  );
  return replicas;
}
