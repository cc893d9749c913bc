import type { Jobs } from "../platform/jobs/jobs.ts";
import { REFUND_QUEUE, type RefundService } from "./refund.service.ts";

/**
 * The refund worker (one refund per job, retried by pg-boss if the provider cannot answer or the process dies
 * mid-way) and a sweep every minute, and at worker start, for any refund whose job was lost, whose worker died,
 * or that the provider has not settled yet.
 */
export async function registerRefundJobs(jobs: Jobs, refunds: RefundService): Promise<void> {
  await jobs.work(
    REFUND_QUEUE,
    { batchSize: 10, burstWhenBatchFull: true, pollingIntervalSeconds: 1, notifyPollingIntervalSeconds: 2 },
    (em, data) => refunds.refund(em, data.installmentId),
  );
  await jobs.work("refunds.sweep", { batchSize: 1 }, async (em) => ({
    attempted: await refunds.resumeDue(em),
  }));
  await jobs.schedule("refunds.sweep", "* * * * *", {});
  await jobs.sendNow("refunds.sweep", {});
}
