import type { BooksService } from "../books/books.service.ts";
import type { LedgerService } from "../ledger/ledger.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import type { Metrics } from "../platform/metrics.ts";
import type { Environment } from "../platform/tenancy.ts";
import type { Outbox } from "../webhooks/outbox.service.ts";
import { lenderScope, disbursementRepository as repo } from "./disbursement.repository.ts";
import type { DisbursementService } from "./disbursement.service.ts";
import type { Installment } from "./installment.entity.ts";
import type { DebitOutcome } from "./provider.ts";
import type { RefundService } from "./refund.service.ts";

/** Repayment rules (CONTRACT.md §6), as data. */
export const repaymentSchedule = {
  /** A failed debit is retried daily... */
  retryEveryMs: ms.day,
  /** ...three times. */
  retries: 3,
  /** A claimed debit is held this long; past it (a crashed worker) the provider is asked again, same reference. */
  leaseMs: 2 * ms.minute,
  /** A debit the provider has not settled yet is asked about again this often (its webhook usually comes first). */
  pendingRecheckMs: 10 * ms.minute,
} as const;

/** What {@link createRepaymentService} returns. */
export type RepaymentService = ReturnType<typeof createRepaymentService>;

const FAILURE_CODE = /^[a-z][a-z0-9_]{0,63}$/;

/**
 * Direct-debit collection of accepted schedules. A data consent revoked later does not stop a schedule the
 * user accepted (CONTRACT.md §6). Each success is written to the user's ledger (so snapshots show it) and to
 * the partner's books, with `REPAYMENT_COLLECTED`; each failure emits `REPAYMENT_FAILED` and is retried daily,
 * three times.
 */
export function createRepaymentService(o: {
  clock: Clock;
  outbox: Outbox;
  ledger: LedgerService;
  books: BooksService;
  disbursements: DisbursementService;
  refunds: RefundService;
  metrics?: Metrics;
}) {
  const { clock, outbox } = o;
  return {
    /**
     * Makes one debit attempt if the installment is due; safe to call any number of times. A new attempt
     * gets a new provider reference (`rpy_…:<attempt>`), kept as the pending reference until its outcome is
     * recorded; while it is pending, a call asks the provider about it instead of charging again.
     */
    async collect(em: Em, installmentId: string): Promise<Installment["status"] | "NOT_DUE"> {
      const claimed = await repo.claimDebit(em, installmentId, clock.now(), repaymentSchedule.leaseMs);
      if (!claimed) return "NOT_DUE";
      const reference = claimed.installment.pendingReference as string;
      const provider = o.disbursements.providerFor(claimed.environment);
      const outcome = await provider.debit(
        em,
        {
          reference,
          partnerReference: claimed.reference,
          amountKobo: claimed.installment.amountKobo,
          userId: claimed.userId,
        },
        { resumed: claimed.wasPending },
      );
      return this.settleDebit(em, reference, outcome);
    },

    /**
     * Records what the provider says of a debit, whoever learnt it (the debit job or the provider's webhook).
     * Only the pending reference is settled, once: SUCCESS writes the user's ledger, the partner's books and
     * `REPAYMENT_COLLECTED` (and, when the payout was reversed while the debit was at the provider, owes it
     * back at once); FAILED emits `REPAYMENT_FAILED` and schedules the next daily retry, or gives up after the
     * third (or at once when the payout is no longer DELIVERED: CANCELLED, nothing is owed). PENDING leaves it
     * to be asked again (or settled by the webhook).
     */
    async settleDebit(
      em: Em,
      reference: string,
      outcome: DebitOutcome,
    ): Promise<Installment["status"] | "NOT_DUE"> {
      let changed: { environment: string; outcome: string } | undefined;
      const status = await em.transactional(async (tx): Promise<Installment["status"] | "NOT_DUE"> => {
        const at = clock.now();
        const pending = await repo.lockPendingDebit(tx, reference);
        if (!pending) return "NOT_DUE";
        const { installment: i, disbursement: d } = pending;
        if (outcome.status === "PENDING") {
          i.nextAttemptAt = new Date(at.getTime() + repaymentSchedule.pendingRecheckMs);
          await repo.save(tx);
          return "SCHEDULED";
        }
        const payload = {
          repaymentId: i.id,
          disbursementId: d.id,
          userId: d.userId,
          amountKobo: i.amountKobo.toString(),
          dueDate: i.dueDate,
          attempt: i.attempts,
        };
        if (outcome.status === "SUCCESS") {
          Object.assign(i, {
            status: "COLLECTED",
            collectedAt: at,
            nextAttemptAt: null,
            pendingReference: null,
            collectedReference: reference,
          });
          await repo.save(tx);
          await o.ledger.ingest(tx, [
            {
              id: `repayment:${i.id}`,
              userId: d.userId,
              amountKobo: i.amountKobo,
              direction: "OUT",
              counterpartyId: `lender:${d.partnerId}`,
              channel: "other",
              occurredAt: at,
              scope: lenderScope(d),
            },
          ]);
          await o.books.record(tx, d, at, { disbursementId: d.id, installmentId: i.id }, [
            ["REPAYMENT_IN", i.amountKobo],
          ]);
          await outbox.raise(tx, {
            partnerId: d.partnerId,
            environment: d.environment,
            type: "REPAYMENT_COLLECTED",
            payload: { ...payload, collectedAt: at.toISOString() },
          });
          // Collected after its payout was reversed: what was collected is owed back (CONTRACT.md §6). Asked
          // of the database, not of `d`: `owe` reads the payout's status under a lock, so a reversal committing
          // at the same time is never missed.
          await o.refunds.owe(tx, d.id);
          await repo.refreshHistory(tx, d.userId, lenderScope(d));
          changed = { environment: d.environment, outcome: "collected" };
          return "COLLECTED";
        }
        // A payout failed or reversed while this debit was at the provider: nothing more is owed.
        const owed = d.status === "DELIVERED";
        const willRetry = owed && i.attempts <= repaymentSchedule.retries;
        Object.assign(i, {
          lastFailure: outcome.reason,
          pendingReference: null,
          status: willRetry ? "SCHEDULED" : owed ? "FAILED" : "CANCELLED",
          nextAttemptAt: willRetry ? new Date(at.getTime() + repaymentSchedule.retryEveryMs) : null,
          failedAt: !willRetry && owed ? at : null,
        });
        await repo.save(tx);
        await outbox.raise(tx, {
          partnerId: d.partnerId,
          environment: d.environment,
          type: "REPAYMENT_FAILED",
          payload: { ...payload, failureCode: outcome.reason, willRetry, failedAt: at.toISOString() },
        });
        await repo.refreshHistory(tx, d.userId, lenderScope(d));
        changed = { environment: d.environment, outcome: willRetry ? "retrying" : "failed" };
        return willRetry ? "SCHEDULED" : "FAILED";
      });
      if (changed) o.metrics?.debits.inc(changed);
      return status;
    },

    /** The debit in flight under a provider reference, in an environment (for the provider's webhook). */
    pendingDebit(em: Em, environment: Environment, reference: string) {
      return repo.pendingDebit(em, environment, reference);
    },

    /** Collects every installment due now (the minute sweep; also what a test's clock drives). */
    async collectDue(em: Em, limit = 500): Promise<number> {
      const due = await repo.dueInstallments(em, clock.now(), limit);
      for (const id of due) await this.collect(em, id);
      return due.length;
    },

    /** The repayments of a disbursement of the caller's, in schedule order. */
    async list(em: Em, disbursementId: string): Promise<Installment[]> {
      return (await o.disbursements.get(em, disbursementId)).installments;
    },

    /**
     * Runs a repayment's next debit now, with the outcome asked for, through the simulator (a sandbox
     * helper): the simulator's answer for the next attempt's reference is set, the attempt made due, then
     * collected as the debit job would.
     */
    async collectInSandbox(
      em: Em,
      id: string,
      outcome: "SUCCESS" | "FAILURE" | undefined,
      failureCode: string,
    ): Promise<Installment> {
      if (!outcome) throw validationFailed({ outcome: "must be SUCCESS or FAILURE" });
      const code = failureCode || "insufficient_funds";
      if (outcome === "FAILURE" && !FAILURE_CODE.test(code))
        throw validationFailed({ failureCode: "must be a snake_case code of up to 64 characters" });
      const disbursementId = await em.transactional(async (tx) => {
        const owned = await repo.lockOwnedInstallment(tx, id);
        if (!owned) throw new ApiError("not_found", `No repayment ${id}.`);
        const { installment: i, disbursement: d } = owned;
        if (d.environment !== "sandbox") throw new ApiError("sandbox_only");
        if (d.status !== "DELIVERED")
          throw new ApiError(
            "conflict",
            `The disbursement is ${d.status}; only a DELIVERED one's repayments are collected.`,
          );
        if (i.status !== "SCHEDULED")
          throw new ApiError(
            "conflict",
            `Only a SCHEDULED repayment can be collected; this one is ${i.status}.`,
          );
        await repo.setSimulatedDebit(
          tx,
          i.pendingReference ?? `${id}:${i.attempts + 1}`,
          i.amountKobo,
          outcome === "SUCCESS" ? { status: "SUCCESS", reason: null } : { status: "FAILED", reason: code },
        );
        i.nextAttemptAt = clock.now();
        await repo.save(tx);
        return d.id;
      });
      await this.collect(em, id);
      const { installments } = await o.disbursements.get(em, disbursementId);
      const found = installments.find((x) => x.id === id);
      if (!found) throw new ApiError("not_found", `No repayment ${id}.`);
      return found;
    },
  };
}
