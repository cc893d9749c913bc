import type { Clock } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { failpoint } from "../platform/failpoints.ts";
import type { Jobs } from "../platform/jobs/jobs.ts";
import type { Logger } from "../platform/logger.ts";
import type { Metrics } from "../platform/metrics.ts";
import type { Environment } from "../platform/tenancy.ts";
import type { Outbox } from "../webhooks/outbox.service.ts";
import type { BookKind, BooksService } from "./books.service.ts";
import type { Disbursement } from "./disbursement.entity.ts";
import { lenderScope, disbursementRepository as repo } from "./disbursement.repository.ts";
import { payoutRepository as payouts } from "./payout.repository.ts";
import type { PaymentProvider, TransferOutcome } from "./provider.ts";
import { refundRepository } from "./refund.repository.ts";
import { REFUND_QUEUE } from "./refund.service.ts";
import { repaymentHistoryRepository as histories } from "./repayment-history.repository.ts";

/** What the payout worker needs. */
export interface PayoutDeps {
  clock: Clock;
  books: BooksService;
  outbox: Outbox;
  /** The provider per environment; production has none until the HTTP adapter is configured. */
  providers: Partial<Record<Environment, PaymentProvider>>;
  /** Queues the refunds a reversal owes, in the reversal's transaction. */
  jobs: Jobs;
  logger: Logger;
  metrics?: Metrics;
  /** How long an attempt holds a PROCESSING payout (PAYOUT_RESUME_AFTER_MS; longer than a provider call). */
  leaseMs: number;
}

/** A settlement's new status, and what it changed (counted once committed), if anything. */
interface Settled {
  status: Disbursement["status"];
  changed?: { environment: string; outcome: string };
}

const book = (o: PayoutDeps, tx: Em, d: Disbursement, at: Date, entries: [BookKind, bigint][]) =>
  o.books.record(tx, d, at, { disbursementId: d.id }, entries);

/** DELIVERED (already written): booked (principal out, fee), `DISBURSEMENT_DELIVERED`, the history refreshed. */
async function recordDelivered(o: PayoutDeps, tx: Em, d: Disbursement, now: Date): Promise<Settled> {
  failpoint("payout.before_record");
  await book(o, tx, d, now, [
    ["PRINCIPAL_OUT", -d.principalKobo],
    ["FEE", -d.feeKobo],
  ]);
  await o.outbox.raise(tx, {
    partnerId: d.partnerId,
    environment: d.environment,
    type: "DISBURSEMENT_DELIVERED",
    subject: { userId: d.userId, objectId: d.id },
    payload: {
      disbursementId: d.id,
      userId: d.userId,
      principalKobo: d.principalKobo.toString(),
      feeKobo: d.feeKobo.toString(),
      destination: d.destination,
      reference: d.reference,
      deliveredAt: now.toISOString(),
    },
  });
  await histories.refresh(tx, d.userId, lenderScope(d));
  return { status: "DELIVERED", changed: { environment: d.environment, outcome: "delivered" } };
}

/** FAILED (already written): the schedule cancelled. Nothing was paid, so nothing is owed. */
async function recordFailed(tx: Em, d: Disbursement): Promise<Settled> {
  await payouts.cancelSchedule(tx, d.id);
  return { status: "FAILED", changed: { environment: d.environment, outcome: "failed" } };
}

/**
 * A DELIVERED payout came back: REVERSED with the reason, principal and fee booked back, the schedule
 * cancelled, and a refund owed (with its job) for every repayment already collected; no event.
 */
async function recordReversed(
  o: PayoutDeps,
  tx: Em,
  d: Disbursement,
  reason: string,
  now: Date,
): Promise<Settled> {
  await payouts.settle(tx, d.id, { status: "REVERSED", failureReason: reason, reversedAt: now });
  await book(o, tx, d, now, [
    ["PRINCIPAL_REVERSED", d.principalKobo],
    ["FEE_REVERSED", d.feeKobo],
  ]);
  await payouts.cancelSchedule(tx, d.id);
  // What was collected is owed back (CONTRACT.md §6): each collected repayment's refund is marked owed with
  // the reversal; the refund worker sends it (RefundService).
  const owed = await refundRepository.owe(tx, d.id);
  for (const installmentId of owed) await o.jobs.send(tx, REFUND_QUEUE, { installmentId });
  await histories.refresh(tx, d.userId, lenderScope(d));
  return { status: "REVERSED", changed: { environment: d.environment, outcome: "reversed" } };
}

/**
 * Settles an outcome in `tx`. The common answers (SUCCESS or FAILED for a PROCESSING payout) are written by
 * one guarded statement, which also takes the row's lock; anything else locks the row and reads it first.
 * Every change is guarded by the status it starts from, so hearing the same outcome twice changes nothing.
 */
async function settleIn(o: PayoutDeps, tx: Em, id: string, outcome: TransferOutcome): Promise<Settled> {
  const now = o.clock.now();
  if (outcome.status === "SUCCESS") {
    const d = await payouts.settleProcessing(tx, id, { status: "DELIVERED", deliveredAt: now });
    if (d) return recordDelivered(o, tx, d, now);
  } else if (outcome.status === "FAILED") {
    const change = { status: "FAILED" as const, failureReason: outcome.reason, failedAt: now };
    const d = await payouts.settleProcessing(tx, id, change);
    if (d) return recordFailed(tx, d);
  }
  const current = await repo.lock(tx, id);
  if (!current) throw new Error(`no disbursement ${id}`);
  if (outcome.status !== "REVERSED") return { status: current.status };
  // Reversed before we saw it delivered: it failed.
  if (current.status === "PROCESSING") {
    await payouts.settle(tx, id, { status: "FAILED", failureReason: outcome.reason, failedAt: now });
    return recordFailed(tx, current);
  }
  if (current.status === "DELIVERED") return recordReversed(o, tx, current, outcome.reason, now);
  return { status: current.status };
}

/** What {@link createPayoutService} returns. */
export type PayoutService = ReturnType<typeof createPayoutService>;

/**
 * Payouts (CONTRACT.md §6): the payout job moves a disbursement PENDING → PROCESSING → DELIVERED (or FAILED),
 * asking the provider by our id, so a retried or crashed job never pays twice; whoever learns the provider's
 * answer settles it here.
 */
export function createPayoutService(o: PayoutDeps) {
  /**
   * The provider of an environment. Each provider serves exactly one environment, and this is the only way
   * to reach one: a sandbox disbursement can never reach the real provider, nor a live one the simulator.
   */
  const providerFor = (environment: Environment): PaymentProvider => {
    const provider = o.providers[environment];
    if (!provider || provider.environment !== environment)
      throw new Error(`no payment provider for ${environment}`);
    return provider;
  };

  /**
   * Records what the provider says of a payout, whoever learnt it (the payout job, the provider's webhook,
   * a sandbox helper). Every change is guarded by the status it starts from, so hearing the same outcome
   * twice changes nothing. SUCCESS: DELIVERED, booked (principal out, fee) and `DISBURSEMENT_DELIVERED`.
   * FAILED (or reversed before we saw it delivered): FAILED with the reason, the schedule cancelled.
   * REVERSED after delivery: REVERSED with the reason, principal and fee booked back, the schedule
   * cancelled, and a refund owed (with its job) for every repayment already collected; no event
   * (CONTRACT.md §6).
   */
  const settlePayout = async (em: Em, id: string, outcome: TransferOutcome) => {
    const settled = await em.transactional((tx) => settleIn(o, tx, id, outcome));
    // Counted once the change is committed, by the process that made it.
    if (settled.changed) o.metrics?.payouts.inc(settled.changed);
    return settled.status;
  };

  /**
   * The payout job. Claims PENDING → PROCESSING and asks the provider with our id as the idempotent
   * reference. A PROCESSING disbursement found here is a retry (a crash after the claim, a time-out, a
   * pending answer): the provider is asked about that reference first, so a retry never pays twice. The
   * outcome is then settled by {@link settlePayout}.
   */
  const payout = async (em: Em, id: string): Promise<Disbursement["status"]> => {
    const now = o.clock.now();
    // One attempt at a time per disbursement, so the provider is never asked twice at once (the job and
    // the sweep): a PROCESSING payout is taken again only once its last attempt's lease has passed.
    const claimed = await payouts.claim(em, id, now, new Date(now.getTime() - o.leaseMs));
    if (!claimed) return "DELIVERED";
    const d = claimed.disbursement;
    failpoint("payout.before_provider");
    let outcome: TransferOutcome;
    try {
      outcome = await providerFor(d.environment).transfer(
        em,
        {
          reference: d.id,
          partnerReference: d.reference,
          amountKobo: d.principalKobo,
          destination: d.destination,
          userId: d.userId,
        },
        { resumed: claimed.previousStatus === "PROCESSING" },
      );
    } catch (err) {
      // The provider could not say what happened: release the lease so the retry asks again at once.
      await payouts.release(em, id);
      throw err;
    }
    failpoint("payout.after_provider");
    return settlePayout(em, id, outcome);
  };

  /**
   * Resumes payouts left PENDING or PROCESSING longer than `olderThanMs` (their job was lost, or the
   * worker died mid-payout). Safe beside a live job: the provider is asked by our id and the outcome is
   * recorded once.
   */
  const resumeStuck = async (em: Em, olderThanMs: number): Promise<number> => {
    const stuck = await payouts.stuck(em, new Date(o.clock.now().getTime() - olderThanMs), 200);
    for (const id of stuck) {
      try {
        await payout(em, id);
      } catch (err) {
        // One payout the provider cannot answer for now does not hold up the others.
        o.logger.warn("payout not resumed", { disbursementId: id, err });
      }
    }
    return stuck.length;
  };

  return { payout, settlePayout, resumeStuck, providerFor };
}
