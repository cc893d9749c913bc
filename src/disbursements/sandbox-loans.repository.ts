import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";

/** A loan that ended before the service knew the user (sandbox fixtures). */
export interface PastLoan {
  id: string;
  partnerId: string;
  userId: string;
  principalKobo: bigint;
  deliveredAt: Date;
  installments: {
    id: string;
    dueDate: string;
    amountKobo: bigint;
    collectedAt: Date | null;
    attempts: number;
    lastFailure: string | null;
    failedAt: Date | null;
  }[];
}

/**
 * A sandbox partner's loans as a whole: the sandbox reset that deletes them, and the fixtures' past loans
 * written as they ended.
 */
export const sandboxLoansRepository = {
  /**
   * Locks a partner's sandbox disbursements and their installments for the sandbox reset (so no payout, debit
   * or refund can be claimed meanwhile), and says whether one of them is at the payment provider now.
   */
  async lock(tx: Em, partnerId: string): Promise<{ busy: boolean }> {
    await sql(
      tx,
      "select id from disbursements where partner_id = $1 and environment = 'sandbox' order by id for update",
      [partnerId],
    );
    await sql(
      tx,
      `select i.id from installments i join disbursements d on d.id = i.disbursement_id
        where d.partner_id = $1 and d.environment = 'sandbox' order by i.id for update of i`,
      [partnerId],
    );
    const [row] = await sql<{ busy: boolean }>(
      tx,
      `select exists (select 1 from disbursements where partner_id = $1 and environment = 'sandbox'
                                                     and status in ('PENDING', 'PROCESSING'))
           or exists (select 1 from installments i join disbursements d on d.id = i.disbursement_id
                       where d.partner_id = $1 and d.environment = 'sandbox'
                         and (i.pending_reference is not null or i.refund_status = 'PENDING')) as busy`,
      [partnerId],
    );
    return { busy: row?.busy === true };
  },

  /**
   * Deletes a partner's sandbox disbursements (locked by {@link lock}, their books entries gone first), their
   * installments and the repayment history their loans made; returns how many there were.
   */
  async delete(tx: Em, partnerId: string): Promise<number> {
    await sql(
      tx,
      `delete from installments i using disbursements d
        where d.id = i.disbursement_id and d.partner_id = $1 and d.environment = 'sandbox'`,
      [partnerId],
    );
    const deleted = await sql(
      tx,
      "delete from disbursements where partner_id = $1 and environment = 'sandbox' returning id",
      [partnerId],
    );
    await sql(tx, "delete from repayment_histories where lender_scope = $1", [partnerId]);
    await sql(tx, "delete from repayment_dues where lender_scope = $1", [partnerId]);
    return deleted.length;
  },

  /** Writes a past loan (sandbox fixtures) as it ended; nothing when its id exists already. */
  async insertPastLoan(tx: Em, loan: PastLoan): Promise<void> {
    const [inserted] = await sql<{ id: string }>(
      tx,
      `insert into disbursements (id, partner_id, environment, user_id, status, principal_kobo, fee_kobo, fee_rate_bps,
                                  destination, reference, schedule_accepted_at, provider, created_at, processing_at, delivered_at)
       values ($1, $2, 'sandbox', $3, 'DELIVERED', $4, 0, 0, 'WALLET', $1, $5, 'sandbox', $5, $5, $5)
       on conflict (id) do nothing returning id`,
      [loan.id, loan.partnerId, loan.userId, loan.principalKobo.toString(), loan.deliveredAt],
    );
    if (!inserted) return;
    const i = loan.installments;
    await sql(
      tx,
      `insert into installments (id, disbursement_id, seq, due_date, amount_kobo, status, attempts, last_failure,
                                 collected_at, failed_at)
       select t.id, $1, t.seq, t.due::date, t.amount, case when t.collected is null then 'FAILED' else 'COLLECTED' end,
              t.attempts, t.failure, t.collected, t.failed
         from unnest($2::text[], $3::int[], $4::text[], $5::bigint[], $6::int[], $7::text[], $8::timestamptz[],
                     $9::timestamptz[]) as t (id, seq, due, amount, attempts, failure, collected, failed)`,
      [
        loan.id,
        i.map((x) => x.id),
        i.map((_, n) => n + 1),
        i.map((x) => x.dueDate),
        i.map((x) => x.amountKobo.toString()),
        i.map((x) => x.attempts),
        i.map((x) => x.lastFailure),
        i.map((x) => x.collectedAt),
        i.map((x) => x.failedAt),
      ],
    );
  },
};
