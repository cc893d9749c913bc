import type { PgBoss } from "pg-boss";
import type { DisbursementService } from "./disbursement.service.ts";
import { COLLECT_QUEUE, PAYOUT_QUEUE } from "./disbursement.service.ts";
import type { RepaymentService } from "./repayment.service.ts";

/**
 * The payout worker (one disbursement per job, retried by pg-boss if the process dies mid-way), the debit
 * worker (one installment per job, on its due date), and sweeps every minute for any due installment whose
 * job was lost and any payout left unfinished (which also asks the provider about transfers still pending).
 */
export async function registerDisbursementJobs(
  boss: PgBoss,
  disbursements: DisbursementService,
  repayments: RepaymentService,
  resumeAfterMs: number,
): Promise<void> {
  await boss.work<{ disbursementId: string }>(
    PAYOUT_QUEUE,
    // A retried job (the provider could not answer) becomes due without a NOTIFY: poll for it every 2 s.
    {
      batchSize: 20,
      localConcurrency: 2,
      burstWhenBatchFull: true,
      pollingIntervalSeconds: 1,
      notifyPollingIntervalSeconds: 2,
    },
    async (jobs) => {
      await Promise.all(jobs.map((j) => disbursements.payout(j.data.disbursementId)));
    },
  );
  await boss.work<{ installmentId: string }>(
    COLLECT_QUEUE,
    { batchSize: 10, burstWhenBatchFull: true, notifyPollingIntervalSeconds: 5 },
    async (jobs) => {
      for (const j of jobs) await repayments.collect(j.data.installmentId);
    },
  );
  await boss.work("repayments.sweep", { batchSize: 1 }, async () => ({
    collected: await repayments.collectDue(),
  }));
  await boss.schedule("repayments.sweep", "* * * * *", {}, { tz: "UTC" });
  await boss.work("disbursements.sweep", { batchSize: 1 }, async () => ({
    resumed: await disbursements.resumeStuck(resumeAfterMs),
  }));
  await boss.schedule("disbursements.sweep", "* * * * *", {}, { tz: "UTC" });
  // A worker starting up (perhaps after a crash) finishes what was left half-done without waiting a minute.
  await boss.send("disbursements.sweep", {});
}
