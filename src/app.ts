import type { PgBoss } from "pg-boss";
import type { Config } from "./config.ts";
import { registerConsentJobs } from "./consent/consent.jobs.ts";
import { registerDisbursementJobs } from "./disbursements/disbursement.jobs.ts";
import { registerRefundJobs } from "./disbursements/refund.jobs.ts";
import { startListeners } from "./edge/listeners.ts";
import { schema } from "./entities.ts";
import { registerIdempotencyJobs } from "./idempotency/idempotency.jobs.ts";
import { registerPersonJobs } from "./person/person.jobs.ts";
import { type Clock, systemClock } from "./platform/clock.ts";
import { loadDataKeys } from "./platform/crypto/data-keys.ts";
import { createSecretBox } from "./platform/crypto/secret-box.ts";
import { type ChangeFeed, startChangeFeed } from "./platform/db/change-feed.ts";
import { checkPooledTimeouts, createOrm, migrate, type Orm } from "./platform/db/orm.ts";
import type { Replicas } from "./platform/db/replicas.ts";
import { startListenerRegistry } from "./platform/http/listener-registry.ts";
import { type QueueName, type Queues, runJobNow, startBoss } from "./platform/jobs/boss.ts";
import { createJobs, type Jobs } from "./platform/jobs/jobs.ts";
import type { Logger } from "./platform/logger.ts";
import { NETWORK_WHILE_HOLDING, onNetworkWhileHolding } from "./platform/network-guard.ts";
import type { RequestLogWriter } from "./requestlog/request-log.writer.ts";
import { registerRetentionJobs } from "./retention/retention.jobs.ts";
import { registerSandboxJobs } from "./sandbox/sandbox.jobs.ts";
import { openPartnerSide } from "./services/partner-side.ts";
import { createServices, type Services } from "./services.ts";
import { registerSigningKeyJobs } from "./signing/signing-key.jobs.ts";
import { sealedSigningKeySample } from "./signing/signing-key.service.ts";
import type { Resolver } from "./webhooks/destination.ts";
import { startWebhookJobs } from "./webhooks/webhook.jobs.ts";

/** What the composition root needs beyond the configuration. */
export interface AppOptions {
  config: Readonly<Config>;
  /** The resolved database (the embedded one's URL when `config.databaseUrl` is unset). */
  databaseUrl: string;
  masterKey: Buffer;
  /** Master keys that only open what they sealed (MASTER_KEYS_ACCEPTED). */
  acceptedMasterKeys?: Buffer[];
  internalToken: string;
  logger: Logger;
  clock?: Clock;
  /** DNS for webhook destinations (tests play DNS with it). */
  resolver?: Resolver;
  /**
   * Tests only (never configuration): with ALLOW_LOCAL_WEBHOOKS, production subscriptions may have local
   * destinations too, for tests whose point is production delivery.
   */
  productionLocalWebhooks?: boolean;
}

/** A running service. */
export interface App {
  /** Base URL of the partner listener (REST, Connect, gRPC-Web, gRPC), when this role serves it. */
  readonly partnerUrl: string | undefined;
  /** Base URL of the internal listener, when this role serves it. */
  readonly internalUrl: string | undefined;
  /** Every REST route, as `VERB template`. */
  readonly routes: readonly string[];
  readonly services: Services;
  readonly boss: PgBoss;
  /** The ORM; fork its EntityManager per unit of work. */
  readonly orm: Orm;
  /** Cache invalidation across instances (LISTEN/NOTIFY). */
  readonly changes: ChangeFeed;
  /** Sends a job and waits for it to complete. */
  runJob<Q extends QueueName>(name: Q, data: Queues[Q]): Promise<unknown>;
  /** True when the database answers. */
  ready(): Promise<boolean>;
  /** Graceful stop: listeners drain, workers finish, connections close. */
  stop(): Promise<void>;
}

/**
 * Where the service's sessions go: `pooled` is the request path's (DATABASE_URL, a pooler in transaction mode
 * when DATABASE_DIRECT_URL is set), `direct` what needs a session of its own (LISTEN, pg-boss, the migration lock).
 */
function databaseUrls(options: AppOptions) {
  const direct = options.config.directUrl ?? options.databaseUrl;
  return { pooled: options.databaseUrl, direct, isPooled: direct !== options.databaseUrl };
}

/** The database opened for the service: migrated, its ORM, the master key checked and the data keys loaded. */
async function openDatabase(options: AppOptions, clock: Clock) {
  const { config, logger } = options;
  const urls = databaseUrls(options);
  const applied = await migrate(urls.direct, schema, logger);
  if (applied.length) logger.info("applied migrations", { migrations: applied });
  const orm = await createOrm({
    databaseUrl: urls.pooled,
    schema,
    poolSize: config.dbPoolSize,
    logger,
    timeouts: config.dbTimeouts,
    pooled: urls.isPooled,
  });
  if (urls.isPooled) await checkPooledTimeouts(orm, config.dbTimeouts, logger);
  const box = createSecretBox(options.masterKey, options.acceptedMasterKeys);
  // Also the check that MASTER_KEY is this database's, before anything is sealed with it.
  const startup = orm.em.fork();
  const dataKeys = await loadDataKeys(startup, box, options.masterKey, clock.now(), () =>
    sealedSigningKeySample(startup),
  ).catch(async (err: unknown) => {
    await orm.close();
    throw err;
  });
  return { orm, box, dataKeys };
}

/** Every feature's job workers and schedules (roles `worker` and `all`); returns what stops the ones it started. */
async function startWorkers(
  jobs: Jobs,
  services: Services,
  o: { config: Readonly<Config>; orm: Orm; clock: Clock; logger: Logger },
) {
  const { config, orm, clock, logger } = o;
  // Every sandbox key finds the fixture users from the first start (CONTRACT.md §7).
  await services.fixtures.ensure(orm.em.fork());
  await registerSandboxJobs(jobs, services.fixtures);
  await registerSigningKeyJobs(jobs, services.signingKeys, logger);
  await registerConsentJobs(jobs, services.consents, logger);
  await registerIdempotencyJobs(jobs, services.idempotency);
  await registerPersonJobs(jobs, services.person);
  await registerRetentionJobs(jobs, services.retention);
  await registerDisbursementJobs(
    jobs,
    services.disbursements,
    services.repayments,
    services.mandates,
    config.payoutResumeAfterMs,
  );
  await registerRefundJobs(jobs, services.refunds);
  return startWebhookJobs({
    jobs,
    worker: services.deliveryWorker,
    orm,
    clock,
    logger,
    sweepIntervalMs: config.webhooks.sweepIntervalMs,
  });
}

/** True when the database answers within a second. */
function readiness(orm: Orm): () => Promise<boolean> {
  return async () => {
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
}

/**
 * The listeners for the role (every role serves the internal one, for /metrics and health; api and all serve
 * partners), and this instance's ports in the registry every instance keeps out of reach of webhooks.
 */
async function serve(
  options: AppOptions,
  o: {
    services: Services;
    clock: Clock;
    orm: Orm;
    replicas: Replicas | undefined;
    requestLog: RequestLogWriter | undefined;
    changes: ChangeFeed;
    ready: () => Promise<boolean>;
  },
  bound: (partnerUrl: string) => void,
) {
  const { services, orm } = o;
  const listeners = await startListeners({
    config: options.config,
    services,
    clock: o.clock,
    logger: options.logger,
    internalToken: options.internalToken,
    ready: o.ready,
    orm,
    replicas: o.replicas,
    requestLog: o.requestLog,
    partner: options.config.role !== "worker",
  });
  if (listeners.partnerUrl) bound(listeners.partnerUrl);
  for (const url of [listeners.partnerUrl, listeners.internalUrl])
    if (url) services.destinations.ownPorts.add(Number(new URL(url).port));
  // Every instance's ports are out of reach of loopback webhooks, not only this one's.
  const registry = await startListenerRegistry(orm, o.changes, [...services.destinations.ownPorts]);
  services.destinations.instancePorts = () => registry.ports();
  return { listeners, registry };
}

/** A PostgreSQL on loopback (the embedded one, a pooler, a replica) is this service's too: never a webhook destination. */
function keepDatabasesOutOfReach(services: Services, urls: readonly string[]): void {
  for (const url of urls) {
    const db = URL.parse(url);
    if (db && /^(localhost|127\.[\d.]+|\[::1\])$/.test(db.hostname))
      services.destinations.ownPorts.add(Number(db.port || 5432));
  }
}

/** A network call inside a transaction is a bug that could drain the pool: loud, counted, with its place. */
function watchNetworkWhileHolding(services: Services, logger: Logger): () => void {
  return onNetworkWhileHolding((v) => {
    services.metrics.networkInTransaction.inc({ kind: v.kind });
    logger.error(NETWORK_WHILE_HOLDING, { kind: v.kind, target: v.target, stack: v.stack });
  });
}

/** Runs each step of a stop after the one before it has ended. */
async function stopInOrder(steps: (() => unknown)[]): Promise<void> {
  for (const step of steps) await step();
}

/** Builds and starts the service for its role. */
export async function createApp(options: AppOptions): Promise<App> {
  const { config, databaseUrl, logger } = options;
  const clock = options.clock ?? systemClock;
  const { orm, box, dataKeys } = await openDatabase(options, clock);
  const { direct } = databaseUrls(options);
  const changes = await startChangeFeed(direct, logger);
  const runWorkers = config.role !== "api";
  const boss = await startBoss({ databaseUrl: direct, logger, supervise: runWorkers });
  const jobs = createJobs({ boss, orm });
  // The partner listener's address is known once it is bound; consent links need it when PUBLIC_URL is unset.
  let boundUrl = `http://127.0.0.1:${config.port}`;
  const services = createServices({
    config,
    orm,
    clock,
    changes,
    box,
    jobs,
    logger,
    resolver: options.resolver,
    productionLocalWebhooks: options.productionLocalWebhooks,
    dataKeys,
    publicUrl: () => config.publicUrl ?? boundUrl,
  });

  keepDatabasesOutOfReach(services, [databaseUrl, direct, ...config.replicaUrls]);
  const partnerSide = { orm, services, clock, ...databaseUrls(options) };
  const { replicas, requestLog } = await openPartnerSide(options, partnerSide);
  const created = await services.signingKeys.maintain(orm.em.fork());
  if (created.length) logger.info("created signing keys", { kids: created });

  const stoppers: (() => void)[] = [watchNetworkWhileHolding(services, logger)];
  if (runWorkers) stoppers.push(await startWorkers(jobs, services, { config, orm, clock, logger }));
  const ready = readiness(orm);

  const served = { services, clock, orm, replicas, requestLog: requestLog?.writer, changes, ready };
  const { listeners, registry } = await serve(options, served, (url) => (boundUrl = url));

  const stop = () =>
    stopInOrder([
      ...stoppers,
      () => listeners.close(),
      // What the last calls left in the request log's buffer is written before its connection closes.
      () => requestLog?.close(),
      () => registry.stop().catch(() => undefined),
      () => boss.stop({ graceful: true, timeout: 10_000, close: true }),
      // Webhook attempts under way end and are recorded; deliveries waiting in this process are let go.
      () => services.deliveryWorker.stop(),
      () => services.sender.close(),
      () => changes.close(),
      () => replicas?.close(),
      () => orm.close(),
    ]);
  let stopped: Promise<void> | undefined;
  return {
    partnerUrl: listeners.partnerUrl,
    internalUrl: listeners.internalUrl,
    routes: listeners.routes,
    services,
    boss,
    orm,
    changes,
    runJob: (name, data) => runJobNow(boss, name, data),
    ready,
    stop: () => {
      stopped ??= stop();
      return stopped;
    },
  };
}
