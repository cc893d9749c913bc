import type { PgBoss } from "pg-boss";
import type { IdempotencyService } from "../idempotency/idempotency.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Orm } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import type { Logger } from "../platform/logger.ts";
import type { DeliveryWorker } from "./delivery.worker.ts";
import { DELIVER_QUEUE } from "./outbox.ts";

/** Attempts older than this are deleted by the hourly housekeeping (stats need 24 hours). */
export const ATTEMPT_RETENTION_MS = 30 * ms.day;

/** Options for {@link startWebhookJobs}. */
export interface WebhookJobsOptions {
  boss: PgBoss;
  worker: DeliveryWorker;
  idempotency: IdempotencyService;
  orm: Orm;
  clock: Clock;
  logger: Logger;
  sweepIntervalMs: number;
}

/**
 * The webhook worker: deliveries in batches (woken by NOTIFY the moment a delivery commits), the sweeper
 * that re-queues overdue deliveries, and the hourly housekeeping. Returns a function that stops the sweeper.
 */
export async function startWebhookJobs(o: WebhookJobsOptions): Promise<() => void> {
  await o.boss.work<{ deliveryId: string }>(
    DELIVER_QUEUE,
    { batchSize: 50, localConcurrency: 2, burstWhenBatchFull: true, pollingIntervalSeconds: 1 },
    async (jobs) => {
      await o.worker.processBatch(jobs.map((j) => j.data.deliveryId));
    },
  );
  await o.boss.work("maintenance.hourly", { batchSize: 1 }, async () => {
    const keys = await o.idempotency.purgeExpired();
    const attempts = await sql(
      o.orm.em.fork(),
      "delete from webhook_attempts where started_at < $1 returning id",
      [new Date(o.clock.now().getTime() - ATTEMPT_RETENTION_MS)],
    );
    return { idempotencyKeys: keys, attempts: attempts.length };
  });
  await o.boss.schedule("maintenance.hourly", "7 * * * *", {}, { tz: "UTC" });

  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    o.worker
      .sweep()
      .catch((err) => o.logger.warn("webhook sweep failed", { err }))
      .finally(() => {
        running = false;
      });
  }, o.sweepIntervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
