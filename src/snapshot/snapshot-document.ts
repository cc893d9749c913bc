import type { Scope } from "../consent/consent.service.ts";
import { utcDay } from "../ledger/ledger.service.ts";
import { tiers } from "../standing/standing.service.ts";
import type { SnapshotData } from "./snapshot.repository.ts";

/*
 * The groups of a snapshot document from the one-query read, under the scope rule (CONTRACT.md §3): a field out
 * of scope is null, a group out of scope is absent. Pure: the service adds the id, the time and the signature.
 */

/** What a consent lets a snapshot show. */
export type Has = (scope: Scope) => boolean;

const bps = (part: bigint, whole: bigint) => Number((part * 10_000n) / whole);

/** The `standing` group: null without the scope. */
export function standingGroup(row: SnapshotData, has: Has) {
  if (!has("standing")) return null;
  return {
    tier: row.standing?.tier ?? "Unrated",
    tierRank: tiers.indexOf(row.standing?.tier ?? "Unrated"),
    score: row.standing?.score ?? null,
    scoreVersion: row.standing?.score_version ?? null,
  };
}

/** The `signals` group: each of its parts only with its own scope. */
export function signalsGroup(row: SnapshotData, has: Has): Record<string, unknown> {
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
  return signals;
}

/** The `ledgerWindow` group over `days` days up to `today`; the trader-only fields are null for others. */
export function ledgerWindowGroup(row: SnapshotData, days: number, today: string) {
  const w = row.window;
  const trader = row.segment === "trader";
  const parties = {
    in: row.parties.in_parties,
    out: row.parties.out_parties,
    senders: row.parties.senders_30d,
  };
  const from = new Date(Date.parse(`${today}T00:00:00Z`) - (days - 1) * 86_400_000);
  return {
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

/** The `kyc` group: every flag null when the platform sent none. */
export function kycGroup(row: SnapshotData) {
  const k = row.kyc;
  return {
    level: k?.level ?? null,
    bvnVerified: k?.bvn_verified ?? null,
    ninVerified: k?.nin_verified ?? null,
    phoneVerified: k?.phone_verified ?? null,
    addressVerified: k?.address_verified ?? null,
    livenessChecked: k?.liveness_checked ?? null,
    verifiedAt: k?.verified_at ? new Date(k.verified_at).toISOString() : null,
  };
}

/** The `repaymentHistory` group, across every lender and naming none. */
export function repaymentHistoryGroup(row: SnapshotData) {
  const h = row.history;
  return {
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
