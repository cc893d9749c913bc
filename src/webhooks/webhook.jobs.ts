import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Orm } from "../platform/db/orm.ts";
import type { Jobs } from "../platform/jobs/jobs.ts";
import type { Logger } from "../platform/logger.ts";
import { contextOf, tracingOn } from "../platform/telemetry.ts";
import { environments } from "../platform/tenancy.ts";
import type { DeliveryWorker } from "./delivery.worker.ts";
import { DELIVER_QUEUES } from "./outbox.service.ts";
import { webhookRepository } from "./webhook.repository.ts";
import { ensureWebhookPartitions } from "./webhook-partition.repository.ts";

/** Attempts older than this are deleted by the hourly housekeeping (stats need 24 hours). */
export const ATTEMPT_RETENTION_MS = 30 * ms.day;

/** Options for {@link startWebhookJobs}. */
export interface WebhookJobsOptions {
  jobs: Jobs;
  worker: DeliveryWorker;
  /** The sweeper is a timer, not a job: it forks its own EntityManager each round. */
  orm: Orm;
  clock: Clock;
  logger: Logger;
  sweepIntervalMs: number;
}

/**
 * The webhook worker: wake-ups taken in batches from one queue per environment (woken by NOTIFY the moment a
 * delivery commits), the sweeper that re-queues overdue deliveries, and the hourly housekeeping (the monthly
 * partitions of the months ahead, old attempts).
 * A batch of wake-ups only claims its deliveries and hands them to the delivery worker, whose limits decide
 * when each is attempted: no job waits for an endpoint. Returns a function that stops the sweeper.
 */
export async function startWebhookJobs(o: WebhookJobsOptions): Promise<() => void> {
  for (const environment of environments) {
    await o.jobs.workBatch(
      DELIVER_QUEUES[environment],
      {
        batchSize: 50,
        localConcurrency: 2,
        burstWhenBatchFull: true,
        // A delayed wake-up (a retry, a delivery moved to later) gets no NOTIFY: it is fetched by polling,
        // which pg-boss slows to 30 s while NOTIFY works. Half a second keeps it on time when the in-process
        // timer of the worker that scheduled it is gone (a restart, another instance); an empty poll is one
        // indexed query.
        pollingIntervalSeconds: 0.5,
        notifyPollingIntervalSeconds: 0.5,
      },
      (em, jobs) =>
        o.worker.admit(
          em,
          jobs.map((j) => j.deliveryId),
          // With tracing on, each attempt continues the trace its event was raised in (its wake-up carries it).
          tracingOn
            ? new Map(jobs.map((j) => [j.deliveryId, contextOf(j as { traceparent?: unknown })]))
            : undefined,
        ),
    );
  }
  // Partitions are by id, and ids carry the real time (platform/ids.ts), not the clock's: the months ahead are
  // counted from the real now. Made at start too, so a worker that was down for a while catches up at once.
  await ensureWebhookPartitions(o.orm.em.fork(), new Date());
  await o.jobs.work("webhooks.housekeeping", { batchSize: 1 }, async (em) => {
    const partitions = await ensureWebhookPartitions(em, new Date());
    const before = new Date(o.clock.now().getTime() - ATTEMPT_RETENTION_MS);
    return { partitions, attempts: await webhookRepository.purgeAttempts(em, before) };
  });
  await o.jobs.schedule("webhooks.housekeeping", "7 * * * *", {});

  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    o.worker
      .sweep(o.orm.em.fork())
      .catch((err) => o.logger.warn("webhook sweep failed", { err }))
      .finally(() => {
        running = false;
      });
  }, o.sweepIntervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
