import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import type { Disbursement } from "./disbursement.entity.ts";
import { disbursementOf } from "./disbursement.repository.ts";

/** What a settled payout writes: its new status, the reason and the time of the change. */
export type PayoutChange = Pick<Disbursement, "status"> &
  Partial<Pick<Disbursement, "failureReason" | "deliveredAt" | "failedAt" | "reversedAt">>;

const SET_OUTCOME = `status = $2, failure_reason = coalesce($3, failure_reason),
  delivered_at = coalesce($4, delivered_at), failed_at = coalesce($5, failed_at),
  reversed_at = coalesce($6, reversed_at)`;

const changeParams = (id: string, change: PayoutChange) => [
  id,
  change.status,
  change.failureReason ?? null,
  change.deliveredAt ?? null,
  change.failedAt ?? null,
  change.reversedAt ?? null,
];

/**
 * The payout worker's statements on `disbursements` (and the schedule a settled payout cancels). The worker
 * serves every tenant: these are raw statements by the row's own id, claiming rows with leases.
 */
export const payoutRepository = {
  /**
   * Claims a payout for one attempt: PENDING → PROCESSING, or a PROCESSING one whose last attempt's lease
   * (`processing_at` before `leaseBefore`) has passed, so one attempt at a time asks the provider. Returns the
   * disbursement and the status it had, or nothing when another attempt holds it or it is settled.
   */
  async claim(
    em: Em,
    id: string,
    now: Date,
    leaseBefore: Date,
  ): Promise<{ disbursement: Disbursement; previousStatus: string } | undefined> {
    const [row] = await sql<Record<string, unknown> & { previous_status: string }>(
      em,
      `update disbursements set status = 'PROCESSING', processing_at = $2
         from (select id as old_id, status as previous_status from disbursements
                where id = $1 and (status = 'PENDING' or (status = 'PROCESSING' and processing_at <= $3))
                for update) old
        where id = old.old_id
       returning disbursements.*, previous_status`,
      [id, now, leaseBefore],
    );
    if (!row) return undefined;
    const { previous_status, ...columns } = row;
    return { disbursement: disbursementOf(em, columns), previousStatus: previous_status };
  },

  /** Releases a payout's lease at once (the provider could not say what happened: the retry asks again). */
  async release(em: Em, id: string): Promise<void> {
    await sql(em, "update disbursements set processing_at = $2 where id = $1 and status = 'PROCESSING'", [
      id,
      new Date(0),
    ]);
  },

  /** Payouts left PENDING or PROCESSING since before `before` (their job lost, their worker dead). */
  async stuck(em: Em, before: Date, limit: number): Promise<string[]> {
    const rows = await sql<{ id: string }>(
      em,
      `select id from disbursements where status in ('PENDING', 'PROCESSING')
          and coalesce(processing_at, created_at) <= $1 order by created_at limit $2`,
      [before, limit],
    );
    return rows.map((r) => r.id);
  },

  /**
   * Settles a payout still PROCESSING, in one statement that locks it until the transaction ends: the common
   * case of a provider's answer (SUCCESS or FAILED), without reading the row first. Answers the disbursement
   * as settled, or nothing when it was not PROCESSING (then the caller locks it and reads what it is).
   */
  async settleProcessing(tx: Em, id: string, change: PayoutChange): Promise<Disbursement | undefined> {
    const [row] = await sql(
      tx,
      `update disbursements set ${SET_OUTCOME} where id = $1 and status = 'PROCESSING' returning *`,
      changeParams(id, change),
    );
    return row && disbursementOf(tx, row);
  },

  /** Writes a settled payout's new status and its times (the row is locked by the caller). */
  async settle(tx: Em, id: string, change: PayoutChange): Promise<void> {
    await sql(tx, `update disbursements set ${SET_OUTCOME} where id = $1`, changeParams(id, change));
  },

  /** Cancels what is left of a schedule; a debit already at the provider is left to settle. */
  async cancelSchedule(tx: Em, disbursementId: string): Promise<void> {
    await sql(
      tx,
      `update installments set status = 'CANCELLED', next_attempt_at = null
        where disbursement_id = $1 and status = 'SCHEDULED' and pending_reference is null`,
      [disbursementId],
    );
  },
};
