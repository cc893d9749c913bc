import { consentRefusal, type Scope } from "../consent/consent.service.ts";
import { utcDay } from "../ledger/ledger.service.ts";
import type { Clock } from "../platform/clock.ts";
import { signEd25519 } from "../platform/crypto/ed25519.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import type { Caller } from "../platform/tenancy.ts";
import { canonicalJson } from "../sdk/canonical-json.ts";
import type { SigningKeyService } from "../signing/signing-key.service.ts";
import { tiers } from "../standing/standing.service.ts";
import { CASHFLOW_DAYS, readSnapshotRow } from "./snapshot.repository.ts";

export { CASHFLOW_DAYS };

/** CONTRACT.md §3: 1 to 365 days. */
export const MAX_WINDOW_DAYS = 365;

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
      const row = await readSnapshotRow(em, caller, userId, requestedDays, today);
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
