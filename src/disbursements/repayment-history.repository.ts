import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";

/**
 * A user's delivered loans in one lender scope (`$1` the user, `$2` the scope, `''` for every lender), read by
 * `disbursements_by_user`: a user has few loans. The partner is compared as an expression (`|| ''`) so that no
 * plan reads a partner's whole book by `disbursements_by_owner_status` and filters it by user, which stale
 * statistics (a partner's loans delivered faster than ANALYZE runs) made the planner choose, at the cost of
 * every delivered loan of the partner on each settlement.
 */
const LOANS = `select d.id, d.principal_kobo from disbursements d
                where d.user_id = $1 and d.status = 'DELIVERED' and ($2 = '' or d.partner_id || '' = $2)`;

/**
 * The roll-ups of `repayment_histories` and `repayment_dues`, in one statement: the history row upserted from
 * each loan's installments, each due date still open upserted, and the due dates no longer open deleted. The
 * upsert and the delete touch disjoint rows (a date is either open now or not), so the order in which
 * PostgreSQL runs the statement's parts does not matter; the end state is exactly the open dates.
 */
const REFRESH = `
  with loans as (${LOANS}),
  per_loan as (
    select l.id, l.principal_kobo,
           count(*) filter (where i.status <> 'COLLECTED') as uncollected,
           bool_or(i.status = 'SCHEDULED') as active,
           coalesce(sum(i.amount_kobo) filter (where i.status = 'COLLECTED'), 0) as repaid,
           count(*) filter (where i.status = 'COLLECTED') as collected,
           count(*) filter (where i.status = 'COLLECTED'
                              and (i.collected_at at time zone 'UTC')::date <= i.due_date) as on_time,
           coalesce(max(greatest(0, (i.collected_at at time zone 'UTC')::date - i.due_date))
                      filter (where i.status = 'COLLECTED'), 0) as max_late,
           max(i.collected_at) as last_at
      from loans l join installments i on i.disbursement_id = l.id
     group by l.id, l.principal_kobo),
  dues as (
    select i.due_date, count(*) as due_count, count(*) filter (where i.status <> 'CANCELLED') as open_count
      from loans l join installments i on i.disbursement_id = l.id
     where i.status <> 'COLLECTED'
     group by i.due_date),
  history as (
    insert into repayment_histories as h (user_id, lender_scope, loans_taken, loans_repaid, loans_active,
           borrowed_kobo, repaid_kobo, collected, on_time, max_days_late_collected, last_repayment_at)
    select $1, $2, count(*), count(*) filter (where uncollected = 0), count(*) filter (where active),
           coalesce(sum(principal_kobo), 0), coalesce(sum(repaid), 0), coalesce(sum(collected), 0),
           coalesce(sum(on_time), 0), coalesce(max(max_late), 0), max(last_at)
      from per_loan
    on conflict (user_id, lender_scope) do update set loans_taken = excluded.loans_taken,
      loans_repaid = excluded.loans_repaid, loans_active = excluded.loans_active,
      borrowed_kobo = excluded.borrowed_kobo, repaid_kobo = excluded.repaid_kobo,
      collected = excluded.collected, on_time = excluded.on_time,
      max_days_late_collected = excluded.max_days_late_collected, last_repayment_at = excluded.last_repayment_at),
  open_dues as (
    insert into repayment_dues (user_id, lender_scope, due_date, due_count, open_count)
    select $1, $2, due_date, due_count, open_count from dues
    on conflict (user_id, lender_scope, due_date) do update set due_count = excluded.due_count,
      open_count = excluded.open_count)
  delete from repayment_dues r
   where r.user_id = $1 and r.lender_scope = $2 and r.due_date not in (select due_date from dues)`;

/**
 * A user's repayment history roll-ups (`repayment_histories`, `repayment_dues`), which snapshots read instead
 * of the loans themselves.
 */
export const repaymentHistoryRepository = {
  /**
   * Recomputes one user's roll-ups in one lender scope from their delivered loans, inside the transaction that
   * settled a loan or an installment of theirs. A transaction advisory lock per user and scope orders
   * concurrent settlements, and the statement after it reads what they committed (READ COMMITTED: its
   * snapshot is taken once the lock is held), so the last writer always writes the whole truth. The cost is
   * one pass over this user's loans in this scope, paid at settlement, never on a snapshot read.
   */
  async refresh(tx: Em, userId: string, scope: string): Promise<void> {
    const params = [userId, scope];
    await sql(
      tx,
      "select pg_advisory_xact_lock(hashtextextended('repayment_history:' || $1 || ':' || $2, 0))",
      params,
    );
    await sql(tx, REFRESH, params);
  },
};
