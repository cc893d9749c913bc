import { consentRefusal } from "../consent/consent.service.ts";
import type { Scope } from "../consent/scopes.ts";
import { utcDay } from "../ledger/ledger.service.ts";
import type { Clock } from "../platform/clock.ts";
import { signEd25519 } from "../platform/crypto/ed25519.ts";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { ApiError } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import type { Caller } from "../platform/tenancy.ts";
import { canonicalJson } from "../sdk/canonical-json.ts";
import type { SigningKeyService } from "../signing/signing-key.service.ts";
import { type Tier, tiers } from "../standing/standing.service.ts";

/** CONTRACT.md §3: 1 to 365 days. */
export const MAX_WINDOW_DAYS = 365;
/** Cashflow signals look back this far, whatever the window. */
export const CASHFLOW_DAYS = 90;

interface Row {
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
  window: {
    in_kobo: string;
    in_count: number;
    out_kobo: string;
    out_count: number;
    in_parties: number;
    out_parties: number;
    senders_30d: number;
  };
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

// One round trip: the newest consent, the user's segment, standing, KYC, the window's totals from the daily
// roll-ups, distinct counterparties from the counterparty index, and the 90-day cashflow figures.
const QUERY = `
with c as (
  select id, status, scopes, ledger_window_days, max_ledger_window_days, expires_at from consents
   where partner_id = $1 and environment = $2 and user_id = $3 order by granted_at desc, id desc limit 1
),
w as (select ($5::date - (coalesce($4::int, (select ledger_window_days from c), 1) - 1)) as from_day)
select
  (select row_to_json(c) from c) as consent,
  (select segment from users where id = $3 and environment = $2) as segment,
  (select json_build_object('tier', tier, 'score', score, 'score_version', score_version,
          'standing_signals', standing_signals, 'work_signals', work_signals) from standings where user_id = $3) as standing,
  (select row_to_json(k) from kyc k where user_id = $3) as kyc,
  (select json_build_object(
      'in_kobo', coalesce(sum(inflow_kobo), 0)::text, 'in_count', coalesce(sum(inflow_count), 0),
      'out_kobo', coalesce(sum(outflow_kobo), 0)::text, 'out_count', coalesce(sum(outflow_count), 0),
      'in_parties', (select count(*) from ledger_counterparties, w
                      where user_id = $3 and direction = 'IN' and last_day >= w.from_day),
      'out_parties', (select count(*) from ledger_counterparties, w
                       where user_id = $3 and direction = 'OUT' and last_day >= w.from_day),
      'senders_30d', (select count(*) from ledger_counterparties
                       where user_id = $3 and direction = 'IN' and last_day >= $5::date - 29))
     from ledger_daily where user_id = $3 and day between (select from_day from w) and $5::date
  ) as window,
  (select json_build_object('active_days', count(*) filter (where inflow_count > 0),
      'in_kobo', coalesce(sum(inflow_kobo), 0)::text, 'out_kobo', coalesce(sum(outflow_kobo), 0)::text,
      'max_day', coalesce(max(inflow_kobo), 0)::text)
     from ledger_daily where user_id = $3 and day between $5::date - ${CASHFLOW_DAYS - 1} and $5::date) as cash,
  (select json_build_object(
      'loans_taken', count(distinct d.id),
      'loans_repaid', count(distinct d.id) filter (where not exists (
          select 1 from installments x where x.disbursement_id = d.id and x.status <> 'COLLECTED')),
      'loans_active', count(distinct d.id) filter (where exists (
          select 1 from installments x where x.disbursement_id = d.id and x.status = 'SCHEDULED')),
      'borrowed', (select coalesce(sum(principal_kobo), 0)::text from disbursements
                    where user_id = $3 and environment = $2 and status = 'DELIVERED'),
      'repaid', coalesce(sum(i.amount_kobo) filter (where i.status = 'COLLECTED'), 0)::text,
      'due', count(i.id) filter (where i.due_date <= $5::date or i.status = 'COLLECTED'),
      'on_time', count(i.id) filter (where i.status = 'COLLECTED' and (i.collected_at at time zone 'UTC')::date <= i.due_date),
      'max_late', coalesce(max(greatest(0, coalesce((i.collected_at at time zone 'UTC')::date, $5::date) - i.due_date))
                    filter (where i.status <> 'CANCELLED' and i.due_date <= $5::date), 0),
      'last_repayment_at', max(i.collected_at))
     from disbursements d join installments i on i.disbursement_id = d.id
    where d.user_id = $3 and d.environment = $2 and d.status = 'DELIVERED') as history`;

const bps = (part: bigint, whole: bigint) => Number((part * 10_000n) / whole);

/** What {@link createSnapshotService} returns. */
export type SnapshotService = ReturnType<typeof createSnapshotService>;

/**
 * Snapshots (CONTRACT.md §3): the consent check and the assembly in one query, the scope rule (a field out
 * of scope is null, a group out of scope is absent), and an Ed25519 signature over the canonical JSON. Nothing
 * is cached: every read sees the consent as it is now and gets its own id, time and signature.
 */
export function createSnapshotService({
  clock,
  signingKeys,
}: {
  clock: Clock;
  signingKeys: SigningKeyService;
}) {
  return {
    /** The signed snapshot document, as the exact JSON text every face returns. */
    async read(em: Em, caller: Caller, userId: string, requestedDays: number | undefined): Promise<string> {
      if (
        requestedDays !== undefined &&
        (!Number.isInteger(requestedDays) || requestedDays < 1 || requestedDays > MAX_WINDOW_DAYS)
      ) {
        throw new ApiError("invalid_ledger_window");
      }
      const now = clock.now();
      const today = utcDay(now);
      const [row] = await sql<Row>(
        em,
        QUERY,
        [caller.partnerId, caller.environment, userId, requestedDays ?? null, today],
        { prepare: true },
      );
      const consent = row?.consent;
      const refusal = consentRefusal(
        row?.segment === null || !consent
          ? undefined
          : { status: consent.status, expiresAt: consent.expires_at },
        now,
      );
      if (refusal || !row || !consent) {
        throw new ApiError(
          refusal ?? "consent_required",
          undefined,
          consent ? { details: { consentId: consent.id } } : {},
        );
      }
      const days = requestedDays ?? consent.ledger_window_days;
      if (days > consent.max_ledger_window_days) {
        throw new ApiError("ledger_window_exceeds_consent", undefined, {
          details: { maxLedgerWindowDays: consent.max_ledger_window_days },
        });
      }
      const has = (s: Scope) => consent.scopes.includes(s);
      const trader = row.segment === "trader";
      const doc: Record<string, unknown> = {
        snapshotId: newId("snp"),
        userId,
        environment: caller.environment,
        consentId: consent.id,
        generatedAt: now.toISOString(),
        standing: has("standing")
          ? {
              tier: row.standing?.tier ?? "Unrated",
              tierRank: tiers.indexOf(row.standing?.tier ?? "Unrated"),
              score: row.standing?.score ?? null,
              scoreVersion: row.standing?.score_version ?? null,
            }
          : null,
      };
      const signals: Record<string, unknown> = {};
      if (has("signals.standing")) {
        const s = row.standing?.standing_signals ?? {};
        signals.standing = {
          tenureDays: s.tenureDays ?? null,
          monthsInTier: s.monthsInTier ?? null,
          scoreChange90d: s.scoreChange90d ?? null,
          disputesLast90d: s.disputesLast90d ?? null,
        };
      }
      if (has("signals.work")) {
        const s = row.standing?.work_signals ?? {};
        signals.work = {
          monthsActive: s.monthsActive ?? null,
          activeDaysLast30d: s.activeDaysLast30d ?? null,
          incomeRegularityBps: s.incomeRegularityBps ?? null,
          employmentVerified: s.employmentVerified ?? null,
        };
      }
      if (has("signals.cashflow")) {
        const inflow = BigInt(row.cash.in_kobo);
        const outflow = BigInt(row.cash.out_kobo);
        signals.cashflow = {
          activeInflowDays90d: row.cash.active_days,
          avgMonthlyInflowKobo: (inflow / 3n).toString(),
          avgMonthlyOutflowKobo: (outflow / 3n).toString(),
          netFlow90dKobo: (inflow - outflow).toString(),
          inflowOutflowRatioBps: outflow > 0n ? bps(inflow, outflow) : null,
          largestDayInflowShareBps: inflow > 0n ? bps(BigInt(row.cash.max_day), inflow) : null,
        };
      }
      doc.signals = signals;
      if (has("ledger")) {
        const w = row.window;
        const parties = { in: w.in_parties, out: w.out_parties, senders: w.senders_30d };
        const from = new Date(Date.parse(`${today}T00:00:00Z`) - (days - 1) * 86_400_000);
        doc.ledgerWindow = {
          days,
          from: utcDay(from),
          to: today,
          inflow: {
            totalKobo: w.in_kobo,
            count: Number(w.in_count),
            distinctCounterparties: Number(parties.in),
          },
          outflow: {
            totalKobo: w.out_kobo,
            count: Number(w.out_count),
            distinctCounterparties: Number(parties.out),
          },
          dailyAvgInflowKobo: trader ? (BigInt(w.in_kobo) / BigInt(days)).toString() : null,
          distinctSendersLast30d: trader ? Number(parties.senders) : null,
        };
      }
      if (has("kyc")) {
        const k = row.kyc;
        doc.kyc = {
          level: k?.level ?? null,
          bvnVerified: k?.bvn_verified ?? null,
          ninVerified: k?.nin_verified ?? null,
          phoneVerified: k?.phone_verified ?? null,
          addressVerified: k?.address_verified ?? null,
          livenessChecked: k?.liveness_checked ?? null,
          verifiedAt: k?.verified_at ? new Date(k.verified_at).toISOString() : null,
        };
      }
      // Across every lender, naming none; absent when the user never borrowed (CONTRACT.md §3).
      if (has("repayment_history") && row.history.loans_taken > 0) {
        const h = row.history;
        doc.repaymentHistory = {
          loansTaken: h.loans_taken,
          loansRepaid: h.loans_repaid,
          loansActive: h.loans_active,
          totalBorrowedKobo: h.borrowed,
          totalRepaidKobo: h.repaid,
          onTimeRateBps: h.due > 0 ? Math.floor((h.on_time * 10_000) / h.due) : null,
          maxDaysPastDue: h.max_late,
          lastRepaymentAt: h.last_repayment_at ? new Date(h.last_repayment_at).toISOString() : null,
        };
      }
      const signer = await signingKeys.signer(em, caller.environment);
      const value = signEd25519(signer.key, Buffer.from(canonicalJson(doc))).toString("base64url");
      doc.signature = { alg: "Ed25519", kid: signer.kid, value };
      return JSON.stringify(doc);
    },
  };
}
