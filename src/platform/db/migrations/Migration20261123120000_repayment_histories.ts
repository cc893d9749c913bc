import { Migration } from "@mikro-orm/migrations";

/**
 * Repayment history as roll-ups maintained when loans and installments settle, so a snapshot reads a few rows
 * however many loans the user has: per user and lender scope (`''` for production, where history spans every
 * lender; the lending partner's id in sandbox, where each partner sees only its own loans and the fixture
 * lender's), the settled totals, and per due date the installments not collected. Backfilled from the loans
 * as they are.
 */
export class Migration20261123120000_repayment_histories extends Migration {
  override name = "Migration20261123120000_repayment_histories";

  up(): void {
    this.addSql(`
      create table repayment_histories (
        user_id text not null references users (id),
        lender_scope text not null,
        loans_taken integer not null default 0,
        loans_repaid integer not null default 0,
        loans_active integer not null default 0,
        borrowed_kobo bigint not null default 0,
        repaid_kobo bigint not null default 0,
        collected integer not null default 0,
        on_time integer not null default 0,
        max_days_late_collected integer not null default 0,
        last_repayment_at timestamptz,
        primary key (user_id, lender_scope)
      )`);
    this.addSql(`
      create table repayment_dues (
        user_id text not null references users (id),
        lender_scope text not null,
        due_date date not null,
        due_count integer not null,
        open_count integer not null,
        primary key (user_id, lender_scope, due_date)
      )`);
    this.addSql(`
      insert into repayment_histories (user_id, lender_scope, loans_taken, loans_repaid, loans_active, borrowed_kobo,
                                       repaid_kobo, collected, on_time, max_days_late_collected, last_repayment_at)
      select user_id, lender_scope, count(*), count(*) filter (where uncollected = 0), count(*) filter (where active),
             sum(principal_kobo), sum(repaid), sum(collected), sum(on_time), max(max_late), max(last_at)
        from (select d.user_id, case when d.environment = 'production' then '' else d.partner_id end as lender_scope,
                     d.principal_kobo,
                     count(*) filter (where i.status <> 'COLLECTED') as uncollected,
                     bool_or(i.status = 'SCHEDULED') as active,
                     coalesce(sum(i.amount_kobo) filter (where i.status = 'COLLECTED'), 0) as repaid,
                     count(*) filter (where i.status = 'COLLECTED') as collected,
                     count(*) filter (where i.status = 'COLLECTED'
                                        and (i.collected_at at time zone 'UTC')::date <= i.due_date) as on_time,
                     coalesce(max(greatest(0, (i.collected_at at time zone 'UTC')::date - i.due_date))
                                filter (where i.status = 'COLLECTED'), 0) as max_late,
                     max(i.collected_at) as last_at
                from disbursements d join installments i on i.disbursement_id = d.id
               where d.status = 'DELIVERED'
               group by d.id) l
       group by user_id, lender_scope`);
    this.addSql(`
      insert into repayment_dues (user_id, lender_scope, due_date, due_count, open_count)
      select d.user_id, case when d.environment = 'production' then '' else d.partner_id end, i.due_date,
             count(*), count(*) filter (where i.status <> 'CANCELLED')
        from disbursements d join installments i on i.disbursement_id = d.id
       where d.status = 'DELIVERED' and i.status <> 'COLLECTED'
       group by 1, 2, 3`);
  }
}
