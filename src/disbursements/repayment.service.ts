import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import type { Environment } from "../platform/tenancy.ts";
import { collectionRepository as collections } from "./collection.repository.ts";
import { type DebitSettlementDeps, repaymentSchedule, settleDebit } from "./debit-settlement.ts";
import { disbursementRepository as repo } from "./disbursement.repository.ts";
import type { DisbursementService } from "./disbursement.service.ts";
import type { Installment } from "./installment.entity.ts";
import type { DebitOutcome } from "./provider.ts";
import { sandboxSimulatorRepository as simulator } from "./sandbox-simulator.repository.ts";

/** Debits a sweep runs at once: the provider's calls overlap, its pool and the provider are not crowded. */
const COLLECT_CONCURRENCY = 4;

export { repaymentSchedule };

/** What {@link createRepaymentService} returns. */
export type RepaymentService = ReturnType<typeof createRepaymentService>;

const FAILURE_CODE = /^[a-z][a-z0-9_]{0,63}$/;

/**
 * Makes a repayment's next debit due now with the simulator's answer for it set (a sandbox helper), in one
 * transaction; answers its disbursement's id.
 */
async function prepareSandboxDebit(
  em: Em,
  id: string,
  now: Date,
  answer: { status: "SUCCESS" | "FAILED"; reason: string | null },
): Promise<string> {
  return em.transactional(async (tx) => {
    const owned = await collections.lockOwned(tx, id);
    if (!owned) throw new ApiError("not_found", `No repayment ${id}.`);
    const { installment: i, disbursement: d } = owned;
    if (d.environment !== "sandbox") throw new ApiError("sandbox_only");
    if (d.status !== "DELIVERED")
      throw new ApiError(
        "conflict",
        `The disbursement is ${d.status}; only a DELIVERED one's repayments are collected.`,
      );
    if (i.status !== "SCHEDULED")
      throw new ApiError("conflict", `Only a SCHEDULED repayment can be collected; this one is ${i.status}.`);
    await simulator.setDebit(tx, i.pendingReference ?? `${id}:${i.attempts + 1}`, i.amountKobo, answer);
    i.nextAttemptAt = now;
    await repo.save(tx);
    return d.id;
  });
}

/**
 * Direct-debit collection of accepted schedules. A data consent revoked later does not stop a schedule the
 * user accepted (CONTRACT.md §6). Each success is written to the user's ledger (so snapshots show it) and to
 * the partner's books, with `REPAYMENT_COLLECTED`; each failure emits `REPAYMENT_FAILED` and is retried daily,
 * three times (debit-settlement.ts).
 */
export function createRepaymentService(o: DebitSettlementDeps & { disbursements: DisbursementService }) {
  const { clock } = o;
  return {
    /**
     * Makes one debit attempt if the installment is due; safe to call any number of times. A new attempt
     * gets a new provider reference (`rpy_…:<attempt>`), kept as the pending reference until its outcome is
     * recorded; while it is pending, a call asks the provider about it instead of charging again.
     */
    async collect(em: Em, installmentId: string): Promise<Installment["status"] | "NOT_DUE"> {
      const claimed = await collections.claim(em, installmentId, clock.now(), repaymentSchedule.leaseMs);
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
      return settleDebit(o, em, reference, outcome);
    },

    /** Records what the provider says of a debit, whoever learnt it (see {@link settleDebit}). */
    settleDebit(
      em: Em,
      reference: string,
      outcome: DebitOutcome,
    ): Promise<Installment["status"] | "NOT_DUE"> {
      return settleDebit(o, em, reference, outcome);
    },

    /** The debit in flight under a provider reference, in an environment (for the provider's webhook). */
    pendingDebit(em: Em, environment: Environment, reference: string) {
      return collections.pending(em, environment, reference);
    },

    /**
     * Collects every installment due now (the minute sweep; also what a test's clock drives), a few at a time,
     * each on its own unit of work: a worker back after an outage finds hundreds due, and each waits on the
     * provider (one at a time, the fault test's 268 took 19 s against a local fake). Each claim is its own lease,
     * so no installment is collected twice. The first failure is thrown once all have been tried.
     */
    async collectDue(em: Em, limit = 500): Promise<number> {
      const due = await collections.due(em, clock.now(), limit);
      let next = 0;
      let failure: { err: unknown } | undefined;
      await Promise.all(
        Array.from({ length: Math.min(COLLECT_CONCURRENCY, due.length) }, async () => {
          for (let id = due[next++]; id !== undefined; id = due[next++]) {
            try {
              await this.collect(em.fork(), id);
            } catch (err) {
              failure ??= { err };
            }
          }
        }),
      );
      if (failure) throw failure.err;
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
      const disbursementId = await prepareSandboxDebit(
        em,
        id,
        clock.now(),
        outcome === "SUCCESS" ? { status: "SUCCESS", reason: null } : { status: "FAILED", reason: code },
      );
      await this.collect(em, id);
      const { installments } = await o.disbursements.get(em, disbursementId);
      const found = installments.find((x) => x.id === id);
      if (!found) throw new ApiError("not_found", `No repayment ${id}.`);
      return found;
    },
  };
}
