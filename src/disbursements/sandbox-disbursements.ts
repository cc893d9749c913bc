import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { isId } from "../platform/ids.ts";
import type { BooksService } from "./books.service.ts";
import type { Disbursement } from "./disbursement.entity.ts";
import { lenderScope, disbursementRepository as repo } from "./disbursement.repository.ts";
import type { PayoutService } from "./payout.service.ts";
import { repaymentHistoryRepository as histories } from "./repayment-history.repository.ts";
import { sandboxLoansRepository as loans, type PastLoan } from "./sandbox-loans.repository.ts";
import { sandboxSimulatorRepository as simulator } from "./sandbox-simulator.repository.ts";

/** A sandbox disbursement of the caller's, locked until the transaction ends. */
async function lockedInSandbox(tx: Em, id: string): Promise<Disbursement> {
  const row = isId("dsb", id) ? await repo.findLocked(tx, id) : null;
  if (!row) throw new ApiError("not_found", `No disbursement ${id}.`);
  if (row.environment !== "sandbox") throw new ApiError("sandbox_only");
  return row;
}

/**
 * What the sandbox does with disbursements beyond the contract's payouts: the helpers that make the simulator
 * fail or reverse a payout (settled as the provider's webhook would settle it), the sandbox reset, and the
 * fixtures' past loans.
 */
export function createSandboxDisbursements(o: { books: BooksService; payouts: PayoutService }) {
  return {
    /**
     * The sandbox provider fails a payout still PENDING or PROCESSING (a sandbox helper): a PENDING payout is
     * taken now and asks the simulator, which answers FAILED; a PROCESSING one is settled with that answer,
     * as a provider webhook would settle it.
     */
    async failInSandbox(em: Em, id: string): Promise<void> {
      // The row stays locked from the check to the settlement: of concurrent calls, one fails it, the others
      // then find it FAILED.
      await em.transactional(async (tx) => {
        const row = await lockedInSandbox(tx, id);
        if (row.status !== "PENDING" && row.status !== "PROCESSING")
          throw new ApiError(
            "conflict",
            `Only a PENDING or PROCESSING disbursement can be failed; this one is ${row.status}.`,
          );
        const failed = { status: "FAILED" as const, reason: "destination_unavailable" };
        await simulator.setTransfer(tx, row.id, row.principalKobo, { ...failed, onlyFrom: "PENDING" });
        if (row.status === "PENDING") await o.payouts.payout(tx, row.id);
        else await o.payouts.settlePayout(tx, row.id, failed);
      });
    },

    /** The sandbox provider reverses a DELIVERED payout (a sandbox helper), settled as its webhook would be. */
    async reverseInSandbox(em: Em, id: string): Promise<void> {
      await em.transactional(async (tx) => {
        const row = await lockedInSandbox(tx, id);
        if (row.status !== "DELIVERED")
          throw new ApiError(
            "conflict",
            `Only a DELIVERED disbursement can be reversed; this one is ${row.status}.`,
          );
        const reversed = { status: "REVERSED" as const, reason: "transfer_reversed" };
        await simulator.setTransfer(tx, row.id, row.principalKobo, reversed);
        await o.payouts.settlePayout(tx, row.id, reversed);
      });
    },

    /**
     * Deletes a partner's sandbox disbursements with their repayments, books entries and repayment history
     * (the sandbox reset), in the caller's transaction; false, deleting nothing, while a payout, debit or
     * refund of theirs is at the payment provider.
     */
    async deleteSandbox(tx: Em, partnerId: string): Promise<number | false> {
      if ((await loans.lock(tx, partnerId)).busy) return false;
      await o.books.deleteSandbox(tx, partnerId);
      return loans.delete(tx, partnerId);
    },

    /**
     * Records a loan repaid (or defaulted) long ago, as it ended, with no event, no job and no booking: the
     * sandbox fixtures' repayment history. Nothing happens when it is there already.
     */
    async recordPastLoan(tx: Em, loan: PastLoan): Promise<void> {
      await loans.insertPastLoan(tx, loan);
      await histories.refresh(
        tx,
        loan.userId,
        lenderScope({ environment: "sandbox", partnerId: loan.partnerId }),
      );
    },
  };
}
