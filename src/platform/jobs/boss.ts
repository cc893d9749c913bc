import type pg from "pg";
import { PgBoss } from "pg-boss";
import { trackPool } from "../db/pool-stats.ts";
import type { Logger } from "../logger.ts";
import { tracingOn } from "../telemetry.ts";

/**
 * Every queue and the payload of its jobs. A new queue is added here first, so senders and workers agree
 * on its data at compile time.
 */
export interface Queues {
  /** Keeps the signing keys on their quarterly schedule (CONTRACT.md §3). */
  "signing-keys.maintain": Record<string, never>;
  /** Wakes the webhook worker for one production delivery; the delivery row says what to do. */
  "webhooks.deliver": { deliveryId: string };
  /** The same for sandbox deliveries: their own queue, so a sandbox flood never delays production's wake-ups. */
  "webhooks.deliver-sandbox": { deliveryId: string };
  /** Collects one installment by direct debit. */
  "repayments.collect": { installmentId: string };
  /** Collects every installment that is due (the safety net of the per-installment jobs). */
  "repayments.sweep": Record<string, never>;
  /** Pays out one disbursement. */
  "disbursements.payout": { disbursementId: string };
  /** Resumes payouts left PENDING or PROCESSING (a lost job, a crashed worker, a transfer the provider has not settled). */
  "disbursements.sweep": Record<string, never>;
  /** Refunds one repayment collected before its payout was reversed. */
  "refunds.refund": { installmentId: string };
  /** Resumes refunds left owed (a lost job, a crashed worker, a refund the provider has not settled). */
  "refunds.sweep": Record<string, never>;
  /** Expires consents past their expiry, with their events. */
  "consents.expire": Record<string, never>;
  /** Keeps the sandbox fixture users present, their ledger topped up to yesterday. */
  "sandbox.fixtures": Record<string, never>;
  /** Hourly: webhook attempts past their retention. */
  "webhooks.housekeeping": Record<string, never>;
  /** Hourly: idempotency records past their 7 days. */
  "idempotency.purge": Record<string, never>;
  "person.purge": Record<string, never>;
  /** Hourly: events, deliveries, consent links, deleted webhooks and sandbox loans past their retention. */
  "retention.purge": Record<string, never>;
}

/** A queue name. */
export type QueueName = keyof Queues;

/** Queues an earlier version had; removed at start. */
const RETIRED_QUEUES = ["maintenance.hourly"];

const HOUR = 3_600;
const DAY = 24 * HOUR;

/**
 * How long pg-boss keeps a job, set on every queue rather than left to pg-boss's defaults (docs/operations.md
 * "Retention"): a job waiting (created, or retry) is deleted 14 days after its start time, and a finished one
 * (completed, failed or cancelled) `finishedSeconds` after it finished. pg-boss has no archive table: its
 * maintenance deletes these rows from `pgboss.job` (every {@link MAINTENANCE_INTERVAL_SECONDS}).
 */
const keep = (finishedSeconds: number) => ({
  retentionSeconds: 14 * DAY,
  deleteAfterSeconds: finishedSeconds,
});

/** The queue pg-boss itself sends cron jobs through. */
export const PG_BOSS_CRON_QUEUE = "__pgboss__send-it";

/** How often pg-boss's maintenance deletes the jobs past their retention (its default is a day). */
export const MAINTENANCE_INTERVAL_SECONDS = HOUR;

/** Queue settings, as data. Every queue states how long its jobs are kept (never 0: that keeps them forever). */
export const queueOptions: Record<
  QueueName,
  {
    retryLimit: number;
    expireInSeconds: number;
    notify: boolean;
    /** Seconds a finished job is kept (pg-boss's `deleteAfterSeconds`). */
    deleteAfterSeconds: number;
    /** Seconds a job may wait, created or retrying, after its start time before it is deleted. */
    retentionSeconds: number;
    retryDelay?: number;
    retryBackoff?: boolean;
    retryDelayMax?: number;
  }
> = {
  // Periodic jobs: a finished run is kept a day, for an operator to look at.
  "signing-keys.maintain": { retryLimit: 3, expireInSeconds: 60, notify: true, ...keep(DAY) },
  // Completed wake-ups carry nothing worth keeping (attempts are recorded on the delivery): drop them soon.
  "webhooks.deliver": { retryLimit: 5, expireInSeconds: 120, notify: true, ...keep(HOUR) },
  "webhooks.deliver-sandbox": { retryLimit: 5, expireInSeconds: 120, notify: true, ...keep(HOUR) },
  "webhooks.housekeeping": { retryLimit: 2, expireInSeconds: 600, notify: false, ...keep(DAY) },
  "idempotency.purge": { retryLimit: 2, expireInSeconds: 600, notify: false, ...keep(DAY) },
  "person.purge": { retryLimit: 2, expireInSeconds: 600, notify: false, ...keep(DAY) },
  // A run stops starting batches after 10 minutes (the rest waits for the next hour), well inside its expiry.
  "retention.purge": { retryLimit: 2, expireInSeconds: 900, notify: false, ...keep(DAY) },
  "sandbox.fixtures": { retryLimit: 2, expireInSeconds: 600, notify: false, ...keep(DAY) },
  "consents.expire": { retryLimit: 2, expireInSeconds: 300, notify: true, ...keep(DAY) },
  // A payout job that dies (or its process does, or the provider cannot answer) is retried, backing off to
  // five minutes; the provider is asked by our id, so a retry never pays twice. Past the retries, the minute
  // sweep keeps asking. These queues are `standard`: two jobs for one payout or installment may exist (a
  // sweep and a retry), and the claim on the row, with its lease, is what lets only one of them act.
  // Money jobs: a finished one (its outcome is on the disbursement or installment row) is kept a week. A debit
  // job waits until its due date, at most the longest tenor away (MAX_TENOR_DAYS_CEILING), and 14 days past it.
  "disbursements.payout": {
    retryLimit: 20,
    expireInSeconds: 60,
    notify: true,
    retryDelay: 2,
    retryBackoff: true,
    retryDelayMax: 300,
    ...keep(7 * DAY),
  },
  "repayments.collect": {
    retryLimit: 20,
    expireInSeconds: 300,
    notify: true,
    retryDelay: 2,
    retryBackoff: true,
    retryDelayMax: 300,
    ...keep(7 * DAY),
  },
  "repayments.sweep": { retryLimit: 1, expireInSeconds: 600, notify: false, ...keep(DAY) },
  // As payouts: the claim on the installment's refund, with its lease, lets one job act; the provider is asked
  // about the charge before a resumed attempt refunds it.
  "refunds.refund": {
    retryLimit: 20,
    expireInSeconds: 60,
    notify: true,
    retryDelay: 2,
    retryBackoff: true,
    retryDelayMax: 300,
    ...keep(7 * DAY),
  },
  "refunds.sweep": { retryLimit: 1, expireInSeconds: 600, notify: false, ...keep(DAY) },
  "disbursements.sweep": { retryLimit: 1, expireInSeconds: 600, notify: false, ...keep(DAY) },
};

/** Options for {@link startBoss}. */
export interface BossOptions {
  databaseUrl: string;
  logger: Logger;
  /** Run the cron monitor and maintenance in this process (workers do; pure api processes need not). */
  supervise: boolean;
  poolSize?: number;
}

/** SQLSTATE admin_shutdown: the server ended the connection (shutting down, or told to by an administrator). */
const ADMIN_SHUTDOWN = "57P01";

/** The schema pg-boss keeps its tables in. */
export const BOSS_SCHEMA = "pgboss";

/** Creates and starts pg-boss inside the service's PostgreSQL, with every queue created. */
export async function startBoss({
  databaseUrl,
  logger,
  supervise,
  poolSize = 4,
}: BossOptions): Promise<PgBoss> {
  const boss = new PgBoss({
    connectionString: databaseUrl,
    schema: BOSS_SCHEMA,
    application_name: "partner-api jobs",
    max: poolSize,
    supervise,
    schedule: supervise,
    useListenNotify: true,
    // pg-boss's own bookkeeping, bounded: job retention per queue (above) swept hourly; no warning or queue
    // statistics tables filled (the service's metrics cover both); instance rows pg-boss prunes after 7 days.
    maintenanceIntervalSeconds: MAINTENANCE_INTERVAL_SECONDS,
    persistWarnings: false,
    persistQueueStats: false,
    // With tracing on (platform/telemetry.ts), pg-boss's own spans (send, process, complete), a job continuing
    // the trace that sent it; off, pg-boss does no telemetry work at all.
    openTelemetry: { enabled: tracingOn, propagateContext: true },
  });
  boss.on("error", (err) => {
    // PostgreSQL closing a connection itself (57P01: its own shutdown, a restart or failover, an administrator's
    // pg_terminate_backend) is not a fault here: pg-boss opens another. A warning, so a restart reads as one.
    if ((err as { code?: unknown }).code === ADMIN_SHUTDOWN)
      logger.warn("job queue connection closed by the database", { err });
    else logger.error("job queue error", { err });
  });
  boss.on("warning", (warning) => logger.warn("job queue warning", { warning }));
  await boss.start();
  // pg-boss's own pool, counted with the service's in the `db_pool_*` gauges (its Db keeps it as `pool`).
  const jobsPool = (boss.getDb() as { pool?: pg.Pool }).pool;
  if (jobsPool) trackPool(jobsPool, "partner-api jobs");
  for (const name of RETIRED_QUEUES) {
    // A retired queue keeps no schedule, so no job is created that no worker takes.
    await boss.unschedule(name).catch(() => undefined);
    if (await boss.getQueue(name)) await boss.deleteQueue(name);
  }
  for (const [name, options] of Object.entries(queueOptions)) {
    // createQueue leaves an existing queue as it was; updateQueue brings its settings up to date.
    await boss.createQueue(name, options);
    await boss.updateQueue(name, options);
  }
  // pg-boss's own queue of cron sends (made by a process that runs schedules): kept like our periodic jobs.
  if (await boss.getQueue(PG_BOSS_CRON_QUEUE)) await boss.updateQueue(PG_BOSS_CRON_QUEUE, keep(DAY));
  return boss;
}

/** Sends a job and waits until it completes; for operators' "run now" and for tests. */
export async function runJobNow<Q extends QueueName>(
  boss: PgBoss,
  name: Q,
  data: Queues[Q],
  timeoutMs = 30_000,
): Promise<unknown> {
  const id = await boss.send(name, data);
  if (!id) throw new Error(`job ${name} was not created`);
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const job = await boss.getJobById(name, id);
    if (job?.state === "completed") return job.output;
    if (job?.state === "failed") throw new Error(`job ${name} failed: ${JSON.stringify(job.output)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`job ${name} did not complete within ${timeoutMs} ms`);
}
