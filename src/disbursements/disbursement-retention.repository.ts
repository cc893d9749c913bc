import type { Em } from "../platform/db/orm.ts";
import { deleteCounted } from "../platform/db/purge.ts";
import { sql } from "../platform/db/sql.ts";
import { FIXTURE_LENDER_ID } from "../platform/tenancy.ts";
import type { PurgeBatch, PurgeStep } from "../retention/retention.service.ts";
import type { BooksService } from "./books.service.ts";
import { disbursementRepository, lenderScope } from "./disbursement.repository.ts";

/**
 * A sandbox disbursement is done with once nothing about it can still move: its status is final (DELIVERED,
 * FAILED, REVERSED or CANCELLED), no installment is still SCHEDULED, has a debit in flight or a refund owed,
 * and the last thing that happened to it (delivery, failure, reversal, cancellation, a collection, a failed
 * debit, a refund) happened before the cut-off. A DELIVERED loan still being repaid is not done.
 *
 * Production disbursements are never purged (they are the books of real money), nor the sandbox fixture
 * lender's past loans (the fixture users' repayment history is made of them).
 */
const DONE = `
  d.environment = 'sandbox' and d.partner_id <> '${FIXTURE_LENDER_ID}'
  and d.created_at < $1
  and d.status in ('DELIVERED', 'FAILED', 'REVERSED', 'CANCELLED')
  and greatest(d.created_at, d.delivered_at, d.failed_at, d.reversed_at, d.cancelled_at) < $1
  and not exists (
    select 1 from installments i
     where i.disbursement_id = d.id
       and (i.status = 'SCHEDULED' or i.pending_reference is not null or i.refund_status = 'PENDING'
            or greatest(i.collected_at, i.failed_at, i.refunded_at) >= $1))`;

/**
 * Deletes the sandbox payment simulator's records of these disbursements, by our references: refunds by their
 * reference and by the charge they returned, debits by every attempt's reference (`rpy_…:<n>`, and the next one
 * a sandbox helper may have set an answer for), the transfer by the disbursement's id.
 */
async function deleteSimulatorRecords(tx: Em, ids: string[]) {
  const sandboxRefunds = await deleteCounted(
    tx,
    `delete from sandbox_refunds
      where reference in (select refund_reference from installments
                           where disbursement_id = any($1::text[]) and refund_reference is not null)
         or charge_reference in (select collected_reference from installments
                                  where disbursement_id = any($1::text[]) and collected_reference is not null)
     returning 1`,
    [ids],
  );
  const sandboxDebits = await deleteCounted(
    tx,
    `delete from sandbox_debits
      where reference in (select i.id || ':' || n from installments i, generate_series(1, i.attempts + 1) n
                           where i.disbursement_id = any($1::text[]))
     returning 1`,
    [ids],
  );
  const sandboxTransfers = await deleteCounted(
    tx,
    "delete from sandbox_transfers where reference = any($1::text[]) returning 1",
    [ids],
  );
  return {
    sandbox_transfers: sandboxTransfers,
    sandbox_debits: sandboxDebits,
    sandbox_refunds: sandboxRefunds,
  };
}

/**
 * The disbursements feature's retention (docs/operations.md "Retention"): sandbox disbursements done with
 * before SANDBOX_RETENTION_DAYS, with their installments, their sandbox book entries (through the books
 * service) and the sandbox payment simulator's records of their transfer, debits and refunds. A batch takes at
 * most a tenth of the batch size in disbursements (each has up to 60 installments).
 */
export function sandboxDisbursementsPurge(books: Pick<BooksService, "forgetSandboxLoans">): PurgeStep {
  return {
    name: "sandbox disbursements",
    retention: "sandbox",
    async batch(tx, cutoff, limit): Promise<PurgeBatch> {
      const picked = await sql<{ id: string }>(
        tx,
        `select d.id from disbursements d where ${DONE}
          order by d.created_at limit $2 for update of d skip locked`,
        [cutoff, Math.max(1, Math.ceil(limit / 10))],
      );
      if (picked.length === 0) return { picked: 0, deleted: {} };
      // Checked again on a fresh snapshot now that the rows are locked: what could undo "done" (a sandbox
      // helper, a reversal, a debit settling) locks the disbursement first, and a debit or refund being claimed
      // is on an installment the check excludes.
      const done = await sql<{ id: string }>(
        tx,
        `select d.id from disbursements d where d.id = any($2::text[]) and ${DONE}`,
        [cutoff, picked.map((r) => r.id)],
      );
      const ids = done.map((r) => r.id);
      if (ids.length === 0) return { picked: picked.length, deleted: {} };
      const simulator = await deleteSimulatorRecords(tx, ids);
      const borrowers = await sql<{ user_id: string; partner_id: string }>(
        tx,
        "select distinct user_id, partner_id from disbursements where id = any($1::text[])",
        [ids],
      );
      const bookEntries = await books.forgetSandboxLoans(tx, ids);
      const installments = await deleteCounted(
        tx,
        "delete from installments where disbursement_id = any($1::text[]) returning 1",
        [ids],
      );
      const disbursements = await deleteCounted(
        tx,
        "delete from disbursements where id = any($1::text[]) and environment = 'sandbox' returning 1",
        [ids],
      );
      // The repayment history the partner sees is of the loans it still has: recomputed without these.
      for (const b of borrowers)
        await disbursementRepository.refreshHistory(
          tx,
          b.user_id,
          lenderScope({ environment: "sandbox", partnerId: b.partner_id }),
        );
      return {
        picked: picked.length,
        deleted: {
          disbursements,
          installments,
          book_entries: bookEntries,
          ...simulator,
        },
      };
    },
  };
}

/**
 * The sandbox payment simulator's records left without their loan (a sandbox reset deletes a partner's sandbox
 * disbursements and installments, not the simulator's side), once older than SANDBOX_RETENTION_DAYS: a
 * transfer whose disbursement is gone, a debit or refund whose installment is gone (their references are ours:
 * `dsb_…`, `rpy_…:<attempt>`). Found through each table's `created_at` index.
 */
export const sandboxSimulatorOrphansPurge: PurgeStep = {
  name: "sandbox simulator records",
  retention: "sandbox",
  async batch(tx, cutoff, limit): Promise<PurgeBatch> {
    const transfers = await deleteCounted(
      tx,
      `delete from sandbox_transfers where reference in (
         select t.reference from sandbox_transfers t
          where t.created_at < $1 and not exists (select 1 from disbursements d where d.id = t.reference)
          order by t.created_at limit $2 for update skip locked)
       returning 1`,
      [cutoff, limit],
    );
    const debits = await deleteCounted(
      tx,
      `delete from sandbox_debits where reference in (
         select t.reference from sandbox_debits t
          where t.created_at < $1
            and not exists (select 1 from installments i where i.id = split_part(t.reference, ':', 1))
          order by t.created_at limit $2 for update skip locked)
       returning 1`,
      [cutoff, limit],
    );
    const refunds = await deleteCounted(
      tx,
      `delete from sandbox_refunds where reference in (
         select t.reference from sandbox_refunds t
          where t.created_at < $1
            and not exists (select 1 from installments i where i.id = split_part(t.charge_reference, ':', 1))
          order by t.created_at limit $2 for update skip locked)
       returning 1`,
      [cutoff, limit],
    );
    return {
      picked: transfers + debits + refunds,
      deleted: { sandbox_transfers: transfers, sandbox_debits: debits, sandbox_refunds: refunds },
    };
  },
};
