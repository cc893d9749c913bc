import type { Scope } from "../consent/consent.service.ts";
import type { Em } from "../platform/db/orm.ts";
import { ReplicaBehind } from "../platform/db/replicas.ts";
import { namedStatements, sql } from "../platform/db/sql.ts";
import type { Tenant } from "../platform/tenancy.ts";
import { FIXTURE_LENDER_ID } from "../platform/tenancy.ts";
import type { Tier } from "../standing/standing.service.ts";

/** Cashflow signals look back this far, whatever the window (`snapshot_row`'s `- 89`: a change is a migration). */
export const CASHFLOW_DAYS = 90;

/** What the one-query read returns. */
export interface SnapshotData {
  consent: {
    id: string;
    status: "ACTIVE" | "REVOKED" | "EXPIRED";
    scopes: Scope[];
    ledger_window_days: number;
    max_ledger_window_days: number;
    expires_at: string;
  } | null;
  segment: string | null;
  standing: {
    tier: Tier;
    score: number;
    score_version: string;
    standing_signals: Record<string, number | null>;
    work_signals: Record<string, number | boolean | null>;
  } | null;
  kyc: {
    level: string;
    bvn_verified: boolean;
    nin_verified: boolean;
    phone_verified: boolean;
    address_verified: boolean;
    liveness_checked: boolean;
    verified_at: string | null;
  } | null;
  window: { in_kobo: string; in_count: number; out_kobo: string; out_count: number };
  /** Distinct counterparties in and out over the window, and senders over the last 30 days. */
  parties: { in_parties: number; out_parties: number; senders_30d: number };
  cash: { active_days: number; in_kobo: string; out_kobo: string; max_day: string };
  history: {
    loans_taken: number;
    loans_repaid: number;
    loans_active: number;
    borrowed: string;
    repaid: string;
    due: number;
    on_time: number;
    max_late: number;
    last_repayment_at: string | null;
  };
}

// One round trip: the newest consent, the user's segment, standing, KYC, distinct counterparties from their counts
// per last day (a row a day at most, however many they are), the window's totals and the 90-day cashflow figures
// from one range of the daily roll-ups, and the repayment history from its roll-ups (maintained when loans and
// installments settle: a few rows however many loans). Each table is read once: a sub-query costs its own index
// search, and this runs on every read.
export const SNAPSHOT_QUERY = `
with c as (
  select id, status, scopes, ledger_window_days, max_ledger_window_days, expires_at from consents
   where partner_id = $1 and environment = $2 and user_id = $3 order by granted_at desc, id desc limit 1
),
w as (select ($5::date - (coalesce($4::int, (select ledger_window_days from c), 1) - 1)) as from_day)
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
      'senders_30d', coalesce(sum(parties) filter (where direction = 'IN' and last_day >= $5::date - 29), 0))
     from ledger_counterparty_days where user_id = $3 and direction in ('IN', 'OUT') and scope = any($7::text[])
                                     and last_day >= least((select from_day from w), $5::date - 29)
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
      'max_late', greatest(coalesce(h.max_late, 0), coalesce($5::date - r.oldest_open, 0)),
      'last_repayment_at', h.last_repayment_at)
     from (select sum(loans_taken) as loans_taken, sum(loans_repaid) as loans_repaid,
                  sum(loans_active) as loans_active, sum(borrowed_kobo) as borrowed, sum(repaid_kobo) as repaid,
                  sum(collected) as collected, sum(on_time) as on_time, max(max_days_late_collected) as max_late,
                  max(last_repayment_at) as last_repayment_at
             from repayment_histories where user_id = $3 and lender_scope = any($6::text[])) h,
          (select sum(due_count) as due, min(due_date) filter (where open_count > 0) as oldest_open
             from repayment_dues where user_id = $3 and lender_scope = any($6::text[]) and due_date <= $5::date) r
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
    from (select day >= (select from_day from w) as in_window, day >= $5::date - ${CASHFLOW_DAYS - 1} as in_cash,
                 sum(inflow_kobo) as inflow_kobo, sum(inflow_count) as inflow_count,
                 sum(outflow_kobo) as outflow_kobo, sum(outflow_count) as outflow_count
            from ledger_daily
           where user_id = $3 and scope = any($7::text[])
             and day between least((select from_day from w), $5::date - ${CASHFLOW_DAYS - 1}) and $5::date
           group by day) d
) f`;

/**
 * The lender scopes of repayment history a tenant sees: every lender in production; in sandbox, the partner's
 * own loans and the fixture lender's (one sandbox partner never sees another's).
 */
const historyScopes = (tenant: Tenant): string[] =>
  tenant.environment === "production" ? [""] : [FIXTURE_LENDER_ID, tenant.partnerId];

// In sandbox, each partner has its own copy of the sandbox users (CONTRACT.md §7), kept as what it changed over
// the shared fixtures: its re-scores (sandbox_standings), the ledger lines its collections and refunds wrote
// (scope = its id, beside the platform's own, scope ''), and its loans in the repayment history. The ledger's
// distinct counterparties add up across the two scopes: a partner's lines name only itself (`lender:<id>`),
// which the platform's own ledger never does.

/**
 * The snapshot's data in one round trip (it earns raw SQL: the hot read, reading the consent, standing, KYC, ledger
 * roll-ups and repayment history of other features' tables read-only, scoped to the tenant for the consent). On
 * the primary, {@link SNAPSHOT_QUERY} as a named prepared statement, whose plan PostgreSQL keeps. On a replica
 * (`after`, the primary's WAL position it must have applied), or behind a pooler where a named statement cannot
 * be kept, the same query in the function `snapshot_row` (snapshot-row.routine.ts), which checks the replica
 * first and keeps its plan per session: a replica that has not applied `after` answers no row, and the read is
 * made again on the primary ({@link ReplicaBehind}). The function costs more than the prepared statement
 * (bench:replicas measured about twice the primary's database time per read), hence both.
 */
export async function readSnapshotRow(
  em: Em,
  tenant: Tenant,
  userId: string,
  requestedDays: number | undefined,
  today: string,
  after: string | null,
): Promise<SnapshotData> {
  const direct = after === null && namedStatements(em);
  const [row] = await sql<SnapshotData>(
    em,
    direct ? SNAPSHOT_QUERY : "select * from snapshot_row($1, $2, $3, $4, $5, $6, $7, $8)",
    [
      tenant.partnerId,
      tenant.environment,
      userId,
      requestedDays ?? null,
      today,
      historyScopes(tenant),
      tenant.environment === "production" ? [""] : ["", tenant.partnerId],
      ...(direct ? [] : [after]),
    ],
    { prepare: true },
  );
  if (!row) throw new ReplicaBehind();
  return row;
}
