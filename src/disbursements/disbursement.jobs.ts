import type { PgBoss } from "pg-boss";
import type { DisbursementService } from "./disbursement.service.ts";
import { COLLECT_QUEUE, PAYOUT_QUEUE } from "./disbursement.service.ts";
import type { RepaymentService } from "./repayment.service.ts";

/**
 * The payout worker (one disbursement per job, retried by pg-boss if the process dies mid-way), the debit
 * worker (one installment per job, on its due date) and a sweep every minute for any due installment whose
 * job was lost.
 */
export async function registerDisbursementJobs(
  boss: PgBoss,
  disbursements: DisbursementService,
  repayments: RepaymentService,
  resumeAfterMs: number,
): Promise<void> {
  // A worker starting up (perhaps after a crash) first finishes what was left half-done.
  await disbursements.resumeStuck(resumeAfterMs);
  await boss.work<{ disbursementId: string }>(
    PAYOUT_QUEUE,
    { batchSize: 20, localConcurrency: 2, burstWhenBatchFull: true, pollingIntervalSeconds: 1 },
    async (jobs) => {
      await Promise.all(jobs.map((j) => disbursements.payout(j.data.disbursementId)));
    },
  );
  await boss.work<{ installmentId: string }>(
    COLLECT_QUEUE,
    { batchSize: 10, burstWhenBatchFull: true },
    async (jobs) => {
      for (const j of jobs) await repayments.collect(j.data.installmentId);
    },
  );
  await boss.work("repayments.sweep", { batchSize: 1 }, async () => ({
    collected: await repayments.collectDue(),
  }));
  await boss.schedule("repayments.sweep", "* * * * *", {}, { tz: "UTC" });
}
