import type { LedgerService } from "../ledger/ledger.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import type { Metrics } from "../platform/metrics.ts";
import type { Outbox } from "../webhooks/outbox.service.ts";
import type { BooksService } from "./books.service.ts";
import { collectionRepository as collections, type PendingDebit } from "./collection.repository.ts";
import { lenderScope, disbursementRepository as repo } from "./disbursement.repository.ts";
import type { Installment } from "./installment.entity.ts";
import type { DebitOutcome } from "./provider.ts";
import type { RefundService } from "./refund.service.ts";
import { repaymentHistoryRepository as histories } from "./repayment-history.repository.ts";

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

/** What settling a debit needs. */
export interface DebitSettlementDeps {
  clock: Clock;
  outbox: Outbox;
  ledger: LedgerService;
  books: BooksService;
  refunds: RefundService;
  metrics?: Metrics;
}

type DebitStatus = Installment["status"] | "NOT_DUE";

/** A settlement's status, and what it changed (counted once committed). */
interface Settled {
  status: DebitStatus;
  changed?: { environment: string; outcome: string };
}

/** The body both repayment events share. */
const eventPayload = ({ installment: i, disbursement: d }: PendingDebit) => ({
  repaymentId: i.id,
  disbursementId: d.id,
  userId: d.userId,
  amountKobo: i.amountKobo.toString(),
  dueDate: i.dueDate,
  attempt: i.attempts,
});

/**
 * SUCCESS: COLLECTED, written to the user's ledger (so snapshots show it) and the partner's books, with
 * `REPAYMENT_COLLECTED`; owed back at once when the payout was reversed while the debit was at the provider.
 */
async function recordCollected(
  o: DebitSettlementDeps,
  tx: Em,
  pending: PendingDebit,
  reference: string,
  at: Date,
): Promise<Settled> {
  const { installment: i, disbursement: d } = pending;
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
  await o.outbox.raise(tx, {
    partnerId: d.partnerId,
    environment: d.environment,
    type: "REPAYMENT_COLLECTED",
    subject: { userId: d.userId, objectId: d.id },
    payload: { ...eventPayload(pending), collectedAt: at.toISOString() },
  });
  // Collected after its payout was reversed: what was collected is owed back (CONTRACT.md §6). Asked of the
  // database, not of `d`: `owe` reads the payout's status under a lock, so a reversal committing at the same
  // time is never missed.
  await o.refunds.owe(tx, d.id);
  await histories.refresh(tx, d.userId, lenderScope(d));
  return { status: "COLLECTED", changed: { environment: d.environment, outcome: "collected" } };
}

/**
 * FAILED: `REPAYMENT_FAILED`, retried daily three times; given up after the third, or at once when the payout
 * is no longer DELIVERED (failed or reversed while this debit was at the provider: CANCELLED, nothing is owed).
 */
async function recordFailed(
  o: DebitSettlementDeps,
  tx: Em,
  pending: PendingDebit,
  reason: string,
  at: Date,
): Promise<Settled> {
  const { installment: i, disbursement: d } = pending;
  const owed = d.status === "DELIVERED";
  const willRetry = owed && i.attempts <= repaymentSchedule.retries;
  Object.assign(i, {
    lastFailure: reason,
    pendingReference: null,
    status: willRetry ? "SCHEDULED" : owed ? "FAILED" : "CANCELLED",
    nextAttemptAt: willRetry ? new Date(at.getTime() + repaymentSchedule.retryEveryMs) : null,
    failedAt: !willRetry && owed ? at : null,
  });
  await repo.save(tx);
  await o.outbox.raise(tx, {
    partnerId: d.partnerId,
    environment: d.environment,
    type: "REPAYMENT_FAILED",
    subject: { userId: d.userId, objectId: d.id },
    payload: { ...eventPayload(pending), failureCode: reason, willRetry, failedAt: at.toISOString() },
  });
  await histories.refresh(tx, d.userId, lenderScope(d));
  return {
    status: willRetry ? "SCHEDULED" : "FAILED",
    changed: { environment: d.environment, outcome: willRetry ? "retrying" : "failed" },
  };
}

/** Settles an outcome in `tx`: only the pending reference, once. PENDING is asked about again later. */
async function settleIn(
  o: DebitSettlementDeps,
  tx: Em,
  reference: string,
  outcome: DebitOutcome,
): Promise<Settled> {
  const at = o.clock.now();
  const pending = await collections.lockPending(tx, reference);
  if (!pending) return { status: "NOT_DUE" };
  if (outcome.status === "PENDING") {
    pending.installment.nextAttemptAt = new Date(at.getTime() + repaymentSchedule.pendingRecheckMs);
    await repo.save(tx);
    return { status: "SCHEDULED" };
  }
  if (outcome.status === "SUCCESS") return recordCollected(o, tx, pending, reference, at);
  return recordFailed(o, tx, pending, outcome.reason, at);
}

/**
 * Records what the provider says of a debit, whoever learnt it (the debit job or the provider's webhook).
 * Only the pending reference is settled, once: SUCCESS writes the user's ledger, the partner's books and
 * `REPAYMENT_COLLECTED` (and, when the payout was reversed while the debit was at the provider, owes it
 * back at once); FAILED emits `REPAYMENT_FAILED` and schedules the next daily retry, or gives up after the
 * third (or at once when the payout is no longer DELIVERED: CANCELLED, nothing is owed). PENDING leaves it
 * to be asked again (or settled by the webhook).
 */
export async function settleDebit(
  o: DebitSettlementDeps,
  em: Em,
  reference: string,
  outcome: DebitOutcome,
): Promise<DebitStatus> {
  const settled = await em.transactional((tx) => settleIn(o, tx, reference, outcome));
  if (settled.changed) o.metrics?.debits.inc(settled.changed);
  return settled.status;
}
