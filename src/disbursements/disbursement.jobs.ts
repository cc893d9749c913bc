import type { Jobs } from "../platform/jobs/jobs.ts";
import type { DisbursementService } from "./disbursement.service.ts";
import { COLLECT_QUEUE, type MandateService, PAYOUT_QUEUE } from "./mandate.service.ts";
import type { RepaymentService } from "./repayment.service.ts";

/**
 * The payout worker (one disbursement per job, retried by pg-boss if the process dies mid-way), the debit
 * worker (one installment per job, on its due date), and sweeps every minute for any due installment whose
 * job was lost, any payout left unfinished (which also asks the provider about transfers still pending), and
 * any repayment mandate left unanswered past its time (CANCELLED, `mandate_expired`).
 */
export async function registerDisbursementJobs(
  jobs: Jobs,
  disbursements: DisbursementService,
  repayments: RepaymentService,
  mandates: MandateService,
  resumeAfterMs: number,
): Promise<void> {
  await jobs.work(
    PAYOUT_QUEUE,
    // A retried job (the provider could not answer) becomes due without a NOTIFY: poll for it every 2 s.
    {
      batchSize: 20,
      localConcurrency: 2,
      burstWhenBatchFull: true,
      pollingIntervalSeconds: 1,
      notifyPollingIntervalSeconds: 2,
      parallel: true,
    },
    (em, data) => disbursements.payout(em, data.disbursementId),
  );
  await jobs.work(
    COLLECT_QUEUE,
    { batchSize: 10, burstWhenBatchFull: true, notifyPollingIntervalSeconds: 5 },
    (em, data) => repayments.collect(em, data.installmentId),
  );
  await jobs.work("repayments.sweep", { batchSize: 1 }, async (em) => ({
    collected: await repayments.collectDue(em),
  }));
  await jobs.schedule("repayments.sweep", "* * * * *", {});
  await jobs.work("disbursements.sweep", { batchSize: 1 }, async (em) => ({
    resumed: await disbursements.resumeStuck(em, resumeAfterMs),
    lapsed: await mandates.expireDue(em),
  }));
  await jobs.schedule("disbursements.sweep", "* * * * *", {});
  // A worker starting up (perhaps after a crash) finishes what was left half-done, and debits what fell due
  // while no worker ran, without waiting a minute.
  await jobs.sendNow("disbursements.sweep", {});
  await jobs.sendNow("repayments.sweep", {});
}
