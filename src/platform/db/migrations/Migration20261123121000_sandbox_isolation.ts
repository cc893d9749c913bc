import { Migration } from "@mikro-orm/migrations";

/**
 * Each sandbox partner's own copy of the sandbox users (CONTRACT.md §7), kept as what that partner changed
 * over the shared fixtures: a re-score by a sandbox helper is the partner's own (`sandbox_standings`), and the
 * ledger lines its collections and refunds write carry its scope (`''` is the platform's own ledger, the only
 * scope production has), so no sandbox partner sees another's.
 */
export class Migration20261123121000_sandbox_isolation extends Migration {
  override name = "Migration20261123121000_sandbox_isolation";

  up(): void {
    this.addSql(`
      create table sandbox_standings (
        partner_id text not null references partners (id),
        environment text not null check (environment in ('sandbox')),
        user_id text not null references users (id),
        tier text not null check (tier in ('Unrated', 'Emerging', 'Established', 'Trusted')),
        score integer not null check (score between 0 and 1000),
        updated_at timestamptz not null,
        primary key (partner_id, user_id)
      )`);
    this.addSql("alter table ledger_entries add column scope text not null default ''");
    this.addSql("alter table ledger_daily add column scope text not null default ''");
    this.addSql("alter table ledger_daily drop constraint ledger_daily_pkey");
    this.addSql("alter table ledger_daily add primary key (user_id, day, scope)");
    this.addSql("alter table ledger_counterparties add column scope text not null default ''");
    this.addSql("alter table ledger_counterparties drop constraint ledger_counterparties_pkey");
    this.addSql(
      "alter table ledger_counterparties add primary key (user_id, direction, counterparty_hash, scope)",
    );
    // A sandbox reset deletes a partner's lines: small partial indexes, since production has only scope ''.
    for (const table of ["ledger_entries", "ledger_daily", "ledger_counterparties"])
      this.addSql(`create index ${table}_by_scope on ${table} (scope) where scope <> ''`);
    for (const table of ["repayment_histories", "repayment_dues"])
      this.addSql(`create index ${table}_by_scope on ${table} (lender_scope) where lender_scope <> ''`);
    // Lines already written by sandbox collections and refunds belong to the partner that lent.
    this.addSql(`
      create temporary table sandbox_lines on commit drop as
      select e.id, e.user_id, e.day, e.direction, e.amount_kobo, e.counterparty_hash, d.partner_id as scope
        from ledger_entries e
        join installments i on e.id in ('repayment:' || i.id, 'refund:' || i.id)
        join disbursements d on d.id = i.disbursement_id and d.environment = 'sandbox'`);
    this.addSql("update ledger_entries e set scope = s.scope from sandbox_lines s where s.id = e.id");
    this.addSql(`
      update ledger_daily d
         set inflow_kobo = d.inflow_kobo - s.in_kobo, inflow_count = d.inflow_count - s.in_count,
             outflow_kobo = d.outflow_kobo - s.out_kobo, outflow_count = d.outflow_count - s.out_count
        from (select user_id, day, coalesce(sum(amount_kobo) filter (where direction = 'IN'), 0) as in_kobo,
                     count(*) filter (where direction = 'IN') as in_count,
                     coalesce(sum(amount_kobo) filter (where direction = 'OUT'), 0) as out_kobo,
                     count(*) filter (where direction = 'OUT') as out_count
                from sandbox_lines group by user_id, day) s
       where d.user_id = s.user_id and d.day = s.day and d.scope = ''`);
    this.addSql(`
      insert into ledger_daily (user_id, day, scope, inflow_kobo, inflow_count, outflow_kobo, outflow_count)
      select user_id, day, scope, coalesce(sum(amount_kobo) filter (where direction = 'IN'), 0),
             count(*) filter (where direction = 'IN'), coalesce(sum(amount_kobo) filter (where direction = 'OUT'), 0),
             count(*) filter (where direction = 'OUT')
        from sandbox_lines group by user_id, day, scope`);
    this.addSql(`
      update ledger_counterparties c set scope = s.scope
        from (select distinct user_id, direction, counterparty_hash, scope from sandbox_lines) s
       where c.user_id = s.user_id and c.direction = s.direction and c.counterparty_hash = s.counterparty_hash`);
  }
}
