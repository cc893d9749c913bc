import type { Jobs } from "../platform/jobs/jobs.ts";
import type { RetentionService } from "./retention.service.ts";

/**
 * Hourly: events, deliveries, consent links, deleted webhooks and sandbox loans past their retention are
 * purged (CONTRACT.md §11, docs/operations.md "Retention"). One job for every table; the job's output is what
 * it deleted, per step.
 */
export async function registerRetentionJobs(jobs: Jobs, retention: RetentionService): Promise<void> {
  await jobs.work("retention.purge", { batchSize: 1 }, (em) => retention.purge(em));
  await jobs.schedule("retention.purge", "37 * * * *", {});
}
