import { Migration } from "@mikro-orm/migrations";

/**
 * Reads on streaming replicas (docs/operations.md "Past one database server"). `replica_has_applied(target)`
 * says whether a replica has applied every complete WAL record up to a flush position of the primary (see
 * platform/db/replica-applied.routine.ts for why a position past the last replayed record may already be
 * covered). `snapshot_row(...)` is the snapshot's one-round-trip query, unchanged, as a PL/pgSQL function that
 * checks `replica_has_applied` first when given a position: the query then runs on a snapshot taken after the
 * check, and its plan is kept per session even behind a pooler in transaction mode (no named statement).
 */
export class Migration20261203000000_replica_reads extends Migration {
  override name = "Migration20261203000000_replica_reads";

  up(): void {
    this.addSql(`
      create function replica_has_applied(p_target pg_lsn) returns boolean
      language plpgsql volatile as $$
      begin
        if pg_last_wal_replay_lsn() >= p_target then
          return true;
        end if;
        if coalesce(pg_last_wal_receive_lsn() < p_target, true) then
          return false;
        end if;
        return exists (select 1 from pg_stat_activity where backend_type = 'startup' and wait_event = 'RecoveryWalStream');
      end
      $$`);
    this.addSql(`
      create function snapshot_row(p_partner text, p_environment text, p_user_id text, p_window_days integer,
                                   p_today text, p_history_scopes text[], p_ledger_scopes text[], p_after pg_lsn)
      returns table (consent json, segment text, standing json, kyc json, parties json, "window" json, cash json,
                     history json)
      language plpgsql volatile as $$
      #variable_conflict use_column
      declare
        v_today date := $5::date;
      begin
        if $8 is not null and not replica_has_applied($8) then
          return;
        end if;
        return query
      with c as (
        select id, status, scopes, ledger_window_days, max_ledger_window_days, expires_at from consents
         where partner_id = $1 and environment = $2 and user_id = $3 order by granted_at desc, id desc limit 1
      ),
      w as (select (v_today - (coalesce($4::int, (select ledger_window_days from c), 1) - 1)) as from_day)
      select
        (select row_to_json(c) from c) as consent,
        (select segment from users where id = $3 and environment = $2) as segment,
        (select json_build_object('tier', coalesce(o.tier, s.tier), 'score', coalesce(o.score, s.score),
                'score_version', coalesce(s.score_version, 'sandbox'), 'standing_signals', coalesce(s.standing_signals, '{}'),
                'work_signals', coalesce(s.work_signals, '{}'))
           from (select 1) one
           left join standings s on s.user_id = $3
           left join sandbox_standings o on $2 = 'sandbox' and o.partner_id = $1 and o.user_id = $3
          where s.user_id is not null or o.user_id is not null) as standing,
        (select row_to_json(k) from kyc k where user_id = $3) as kyc,
        (select json_build_object(
            'in_parties', coalesce(sum(parties) filter (where direction = 'IN' and last_day >= (select from_day from w)), 0),
            'out_parties', coalesce(sum(parties) filter (where direction = 'OUT' and last_day >= (select from_day from w)), 0),
            'senders_30d', coalesce(sum(parties) filter (where direction = 'IN' and last_day >= v_today - 29), 0))
           from ledger_counterparty_days where user_id = $3 and direction in ('IN', 'OUT') and scope = any($7::text[])
                                           and last_day >= least((select from_day from w), v_today - 29)
        ) as parties,
        f.window,
        f.cash,
        (select json_build_object(
            'loans_taken', coalesce(h.loans_taken, 0),
            'loans_repaid', coalesce(h.loans_repaid, 0),
            'loans_active', coalesce(h.loans_active, 0),
            'borrowed', coalesce(h.borrowed, 0)::text,
            'repaid', coalesce(h.repaid, 0)::text,
            'due', coalesce(h.collected, 0) + coalesce(r.due, 0),
            'on_time', coalesce(h.on_time, 0),
            'max_late', greatest(coalesce(h.max_late, 0), coalesce(v_today - r.oldest_open, 0)),
            'last_repayment_at', h.last_repayment_at)
           from (select sum(loans_taken) as loans_taken, sum(loans_repaid) as loans_repaid,
                        sum(loans_active) as loans_active, sum(borrowed_kobo) as borrowed, sum(repaid_kobo) as repaid,
                        sum(collected) as collected, sum(on_time) as on_time, max(max_days_late_collected) as max_late,
                        max(last_repayment_at) as last_repayment_at
                   from repayment_histories where user_id = $3 and lender_scope = any($6::text[])) h,
                (select sum(due_count) as due, min(due_date) filter (where open_count > 0) as oldest_open
                   from repayment_dues where user_id = $3 and lender_scope = any($6::text[]) and due_date <= v_today) r
        ) as history
      from (
        select json_build_object(
                 'in_kobo', coalesce(sum(inflow_kobo) filter (where in_window), 0)::text,
                 'in_count', coalesce(sum(inflow_count) filter (where in_window), 0),
                 'out_kobo', coalesce(sum(outflow_kobo) filter (where in_window), 0)::text,
                 'out_count', coalesce(sum(outflow_count) filter (where in_window), 0)) as window,
               json_build_object(
                 'active_days', count(*) filter (where in_cash and inflow_count > 0),
                 'in_kobo', coalesce(sum(inflow_kobo) filter (where in_cash), 0)::text,
                 'out_kobo', coalesce(sum(outflow_kobo) filter (where in_cash), 0)::text,
                 'max_day', coalesce(max(inflow_kobo) filter (where in_cash), 0)::text) as cash
          from (select day >= (select from_day from w) as in_window, day >= v_today - 89 as in_cash,
                       sum(inflow_kobo) as inflow_kobo, sum(inflow_count) as inflow_count,
                       sum(outflow_kobo) as outflow_kobo, sum(outflow_count) as outflow_count
                  from ledger_daily
                 where user_id = $3 and scope = any($7::text[])
                   and day between least((select from_day from w), v_today - 89) and v_today
                 group by day) d
      ) f;
      end
      $$`);
  }

  override down(): void {
    this.addSql("drop function snapshot_row(text, text, text, integer, text, text[], text[], pg_lsn)");
    this.addSql("drop function replica_has_applied(pg_lsn)");
  }
}
