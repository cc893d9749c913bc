import type { Jobs } from "../platform/jobs/jobs.ts";
import type { IdempotencyService } from "./idempotency.service.ts";

/** Hourly: idempotency records past their 7 days are deleted (CONTRACT.md §11). */
export async function registerIdempotencyJobs(jobs: Jobs, idempotency: IdempotencyService): Promise<void> {
  await jobs.work("idempotency.purge", { batchSize: 1 }, async (em) => ({
    purged: await idempotency.purgeExpired(em),
  }));
  await jobs.schedule("idempotency.purge", "7 * * * *", {});
}
