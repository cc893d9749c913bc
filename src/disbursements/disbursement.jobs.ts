import type { PgBoss } from "pg-boss";
import type { DisbursementService } from "./disbursement.service.ts";
import { PAYOUT_QUEUE } from "./disbursement.service.ts";

/** The payout worker: one disbursement per job, retried by pg-boss if the process dies mid-way. */
export async function registerDisbursementJobs(
  boss: PgBoss,
  disbursements: DisbursementService,
): Promise<void> {
  await boss.work<{ disbursementId: string }>(
    PAYOUT_QUEUE,
    { batchSize: 10, localConcurrency: 2 },
    async (jobs) => {
      await Promise.all(jobs.map((j) => disbursements.payout(j.data.disbursementId)));
    },
  );
}
