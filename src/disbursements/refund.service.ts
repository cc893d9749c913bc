import type { LedgerService } from "../ledger/ledger.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { failpoint } from "../platform/failpoints.ts";
import type { Jobs } from "../platform/jobs/jobs.ts";
import type { Logger } from "../platform/logger.ts";
import type { Environment } from "../platform/tenancy.ts";
import type { BooksService } from "./books.service.ts";
import { lenderScope } from "./disbursement.repository.ts";
import type { DisbursementService } from "./disbursement.service.ts";
import type { RefundOutcome } from "./provider.ts";
import { type LockedRefund, refundRepository as repo } from "./refund.repository.ts";

/** The queue of refund jobs, one per refund owed (the claim on its row lets one attempt act at a time). */
export const REFUND_QUEUE = "refunds.refund";

/** Refund rules, as data. */
export const refundSchedule = {
  /** A refund the provider accepted but has not settled is asked about again this often (or its webhook settles it). */
  pendingRecheckMs: 10 * ms.minute,
  /** A refund owed this long without an attempt lost its job: the sweep makes the attempt. */
  unattemptedAfterMs: ms.minute,
} as const;

/** Where a refund stands after an attempt. */
export type RefundStatus = "PENDING" | "REFUNDED" | "FAILED" | "NOT_DUE";

/** What {@link createRefundService} returns. */
export type RefundService = ReturnType<typeof createRefundService>;

/** What refunds need. */
interface RefundDeps {
  clock: Clock;
  jobs: Jobs;
  books: BooksService;
  ledger: LedgerService;
  disbursements: DisbursementService;
  logger: Logger;
  /** How long one attempt holds a refund (PAYOUT_RESUME_AFTER_MS; longer than a provider call). */
  leaseMs: number;
}

/** REFUNDED: `REPAYMENT_REFUND` (negative) on the partner's books, and the money back on the user's ledger. */
async function recordRefunded(o: RefundDeps, tx: Em, r: LockedRefund, at: Date): Promise<RefundStatus> {
  await repo.refunded(tx, r.installmentId, at);
  const tenant = { partnerId: r.partnerId, environment: r.environment };
  await o.books.record(tx, tenant, at, { disbursementId: r.disbursementId, installmentId: r.installmentId }, [
    ["REPAYMENT_REFUND", -r.amountKobo],
  ]);
  await o.ledger.ingest(tx, [
    {
      id: `refund:${r.installmentId}`,
      userId: r.userId,
      amountKobo: r.amountKobo,
      direction: "IN",
      counterpartyId: `lender:${r.partnerId}`,
      channel: "other",
      occurredAt: at,
      scope: lenderScope(r),
    },
  ]);
  return "REFUNDED";
}

/**
 * Records what the provider says of a refund in `tx`, once: SUCCESS books `REPAYMENT_REFUND` (negative) and
 * writes the user's ledger; FAILED is kept with its reason and logged for an operator; PENDING is asked about
 * again later.
 */
async function settleIn(
  o: RefundDeps,
  tx: Em,
  installmentId: string,
  outcome: RefundOutcome,
): Promise<RefundStatus> {
  const at = o.clock.now();
  const r = await repo.lock(tx, installmentId);
  if (!r) return "NOT_DUE";
  if (r.status !== "PENDING") return r.status;
  if (outcome.status === "PENDING") {
    await repo.retryAt(tx, installmentId, new Date(at.getTime() + refundSchedule.pendingRecheckMs));
    return "PENDING";
  }
  failpoint("refund.before_record");
  if (outcome.status === "FAILED") {
    await repo.failed(tx, installmentId, outcome.reason);
    o.logger.error("refund refused by the payment provider", {
      repaymentId: installmentId,
      reason: outcome.reason,
    });
    return "FAILED";
  }
  return recordRefunded(o, tx, r, at);
}

/**
 * The refund job's attempt: claims the refund for one attempt, asks the provider to refund the charge (a
 * resumed attempt asks about it first), then settles the answer. A provider that cannot answer releases the
 * claim and throws, so the job is retried and asks again.
 */
async function attemptRefund(o: RefundDeps, em: Em, installmentId: string): Promise<RefundStatus> {
  const claimed = await repo.claim(em, installmentId, o.clock.now(), o.leaseMs);
  if (!claimed) return "NOT_DUE";
  failpoint("refund.before_provider");
  let outcome: RefundOutcome;
  try {
    outcome = await o.disbursements.providerFor(claimed.environment).refund(
      em,
      {
        reference: claimed.reference,
        chargeReference: claimed.chargeReference,
        amountKobo: claimed.amountKobo,
        userId: claimed.userId,
      },
      { resumed: claimed.resumed },
    );
  } catch (err) {
    await repo.retryAt(em, installmentId, new Date(0));
    throw err;
  }
  failpoint("refund.after_provider");
  return em.transactional((tx) => settleIn(o, tx, installmentId, outcome));
}

/**
 * Refunds of repayments collected before their payout was reversed (CONTRACT.md §6): what was collected is
 * owed back. Each is refunded once through the provider, against the charge that collected it, by a job that
 * claims it with a lease (a crashed attempt is taken again after the lease, and asks the provider before
 * refunding anything), then settled in one transaction: REFUNDED, `REPAYMENT_REFUND` on the partner's books
 * and an inflow on the user's ledger. Settling is guarded by status, so the same answer twice changes nothing.
 */
export function createRefundService(o: RefundDeps) {
  const enqueue = async (em: Em, installmentIds: string[]) => {
    for (const installmentId of installmentIds) await o.jobs.send(em, REFUND_QUEUE, { installmentId });
  };

  return {
    /**
     * Owes a refund for every repayment collected on a REVERSED disbursement that has none yet, with its job,
     * in the caller's transaction (a debit that was still at the provider when the payout was reversed, and
     * succeeded after). Nothing for any other disbursement.
     */
    async owe(tx: Em, disbursementId: string): Promise<number> {
      const owed = await repo.owe(tx, disbursementId);
      await enqueue(tx, owed);
      return owed.length;
    },

    /** The refund job (see {@link attemptRefund}). */
    refund(em: Em, installmentId: string): Promise<RefundStatus> {
      return attemptRefund(o, em, installmentId);
    },

    /** Records what the provider says of a refund, whoever learnt it (the refund job or the provider's webhook). */
    settle(em: Em, installmentId: string, outcome: RefundOutcome): Promise<RefundStatus> {
      return em.transactional((tx) => settleIn(o, tx, installmentId, outcome));
    },

    /** The refund still owed on a charge, in an environment (for the provider's webhook). */
    pendingByCharge(em: Em, environment: Environment, chargeReference: string) {
      return repo.pendingByCharge(em, environment, chargeReference);
    },

    /**
     * Attempts every refund due (past its lease or recheck, or owed a minute without an attempt): the minute
     * sweep and a worker starting up, so a lost job or a crashed worker leaves nothing owed. Safe beside a live
     * job: the claim lets one attempt act, and the provider refunds a charge at most once.
     */
    async resumeDue(em: Em, limit = 200): Promise<number> {
      const now = o.clock.now();
      const lost = new Date(now.getTime() - refundSchedule.unattemptedAfterMs);
      const due = await repo.due(em, now, lost, limit);
      for (const id of due) {
        try {
          await attemptRefund(o, em, id);
        } catch (err) {
          // One refund the provider cannot answer for now does not hold up the others.
          o.logger.warn("refund not resumed", { repaymentId: id, err });
        }
      }
      return due.length;
    },
  };
}
