import type { Consent, ConsentService } from "../consent/consent.service.ts";
import type { ConsentLinkService, LinkView } from "../consent/consent-link.service.ts";
import type { DisbursementRow, DisbursementService } from "../disbursements/disbursement.service.ts";
import type { RepaymentRow, RepaymentService } from "../disbursements/repayment.service.ts";
import type { Clock } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import type { Caller } from "../platform/tenancy.ts";
import type { StandingService } from "../standing/standing.service.ts";
import { tiers } from "../standing/standing.service.ts";
import type { UserService } from "../users/user.service.ts";

const FAILURE_CODE = /^[a-z][a-z0-9_]{0,63}$/;
/** `rpy_` + the disbursement's ULID + `_` + the installment's place in the schedule. */
const REPAYMENT_ID = /^rpy_[0-9A-HJKMNP-TV-Z]{26}_\d{1,2}$/;

/** What {@link createSandboxService} returns. */
export type SandboxService = ReturnType<typeof createSandboxService>;

/**
 * The sandbox helpers (CONTRACT.md §7): they act for the people and systems a partner cannot drive from
 * outside, through the same services (and so the same transactions and events) as the real actions. Every
 * helper refuses a live key with 403 `sandbox_only` before it looks at anything else.
 */
export function createSandboxService(o: {
  clock: Clock;
  users: UserService;
  consents: ConsentService;
  consentLinks: ConsentLinkService;
  standing: StandingService;
  disbursements: DisbursementService;
  repayments: RepaymentService;
}) {
  const sandboxOnly = (caller: Caller) => {
    if (caller.environment !== "sandbox") throw new ApiError("sandbox_only");
  };

  return {
    /** The user accepts or declines a consent link of the caller's. */
    async decideConsentLink(em: Em, caller: Caller, id: string, accept: boolean): Promise<LinkView> {
      sandboxOnly(caller);
      const decision = await o.consentLinks.decideById(em, id, accept);
      if (decision.outcome === "no_account") {
        throw new ApiError(
          "conflict",
          "No sandbox user has this link's phone number; send links to a fixture number such as +2348000000001.",
        );
      }
      return decision.link;
    },

    /** The user revokes a consent of the caller's from the dashboard. */
    async revokeConsentAsUser(em: Em, caller: Caller, id: string): Promise<Consent> {
      sandboxOnly(caller);
      await o.consents.get(em, id);
      return o.consents.revokeByUser(em, id);
    },

    /** The platform re-scores a sandbox user, keeping the other standing signals. */
    async setStanding(
      em: Em,
      caller: Caller,
      userId: string,
      tier: string,
      score: number,
    ): Promise<{ tier: string; score: number; tierChanged: boolean }> {
      sandboxOnly(caller);
      if ((await o.users.environmentOf(em, userId)) !== "sandbox")
        throw new ApiError("not_found", `No sandbox user ${userId}.`);
      if (!(tiers as readonly string[]).includes(tier))
        throw validationFailed({ tier: `must be one of ${tiers.join(", ")}` });
      const [current] = await sql<{
        score_version: string;
        standing_signals: Record<string, number | null>;
        work_signals: Record<string, number | boolean | null>;
      }>(em, "select score_version, standing_signals, work_signals from standings where user_id = $1", [
        userId,
      ]);
      const { tierChanges } = await o.standing.upsertStanding(em, [
        {
          userId,
          tier,
          score,
          scoreVersion: current?.score_version ?? "sandbox",
          standingSignals: {
            tenureDays: null,
            monthsInTier: null,
            scoreChange90d: null,
            disputesLast90d: null,
            ...current?.standing_signals,
          },
          workSignals: {
            monthsActive: null,
            activeDaysLast30d: null,
            incomeRegularityBps: null,
            employmentVerified: null,
            ...current?.work_signals,
          } as never,
          asOf: o.clock.now(),
        },
      ]);
      return { tier, score, tierChanged: tierChanges > 0 };
    },

    /** The provider fails a payout still PENDING or PROCESSING. */
    async failDisbursement(em: Em, caller: Caller, id: string): Promise<DisbursementRow> {
      sandboxOnly(caller);
      const { row } = await o.disbursements.get(em, caller, id);
      if (row.status !== "PENDING" && row.status !== "PROCESSING")
        throw new ApiError(
          "conflict",
          `Only a PENDING or PROCESSING disbursement can be failed; this one is ${row.status}.`,
        );
      await sql(
        em,
        `insert into sandbox_transfers (reference, amount_kobo, status, failure_reason, created_at)
         values ($1, $2, 'FAILED', 'destination_unavailable', now())
         on conflict (reference) do update set status = 'FAILED', failure_reason = 'destination_unavailable'
          where sandbox_transfers.status = 'PENDING'`,
        [row.id, row.principal_kobo],
      );
      // A PENDING payout is taken now and asks the simulator, which answers FAILED; a PROCESSING one is
      // settled with that answer, as a provider webhook would settle it.
      if (row.status === "PENDING") await o.disbursements.payout(em, row.id);
      else
        await o.disbursements.settlePayout(em, row.id, {
          status: "FAILED",
          reason: "destination_unavailable",
        });
      return (await o.disbursements.get(em, caller, id)).row;
    },

    /** The provider reverses a DELIVERED payout. */
    async reverseDisbursement(em: Em, caller: Caller, id: string): Promise<DisbursementRow> {
      sandboxOnly(caller);
      const { row } = await o.disbursements.get(em, caller, id);
      if (row.status !== "DELIVERED")
        throw new ApiError(
          "conflict",
          `Only a DELIVERED disbursement can be reversed; this one is ${row.status}.`,
        );
      await sql(
        em,
        "update sandbox_transfers set status = 'REVERSED', failure_reason = 'transfer_reversed' where reference = $1",
        [row.id],
      );
      await o.disbursements.settlePayout(em, row.id, { status: "REVERSED", reason: "transfer_reversed" });
      return (await o.disbursements.get(em, caller, id)).row;
    },

    /** Runs the repayment's next debit now, with the outcome asked for. */
    async collectRepayment(
      em: Em,
      caller: Caller,
      id: string,
      outcome: "SUCCESS" | "FAILURE" | undefined,
      failureCode: string,
    ): Promise<RepaymentRow> {
      sandboxOnly(caller);
      if (!outcome) throw validationFailed({ outcome: "must be SUCCESS or FAILURE" });
      const code = failureCode || "insufficient_funds";
      if (outcome === "FAILURE" && !FAILURE_CODE.test(code))
        throw validationFailed({ failureCode: "must be a snake_case code of up to 64 characters" });
      const [owned] = REPAYMENT_ID.test(id)
        ? await sql<{ disbursement_id: string }>(
            em,
            `select i.disbursement_id from installments i join disbursements d on d.id = i.disbursement_id
              where i.id = $1 and d.partner_id = $2 and d.environment = $3`,
            [id, caller.partnerId, caller.environment],
          )
        : [];
      if (!owned) throw new ApiError("not_found", `No repayment ${id}.`);
      await em.transactional(async (tx) => {
        const [r] = await sql<{
          status: string;
          attempts: number;
          pending_reference: string | null;
          d_status: string;
        }>(
          tx,
          `select i.status, i.attempts, i.pending_reference, d.status as d_status
             from installments i join disbursements d on d.id = i.disbursement_id where i.id = $1 for update of i`,
          [id],
        );
        if (r?.d_status !== "DELIVERED")
          throw new ApiError(
            "conflict",
            `The disbursement is ${r?.d_status}; only a DELIVERED one's repayments are collected.`,
          );
        if (r.status !== "SCHEDULED")
          throw new ApiError(
            "conflict",
            `Only a SCHEDULED repayment can be collected; this one is ${r.status}.`,
          );
        // The simulator's answer for the next attempt's reference, then the attempt is due now.
        await sql(
          tx,
          `insert into sandbox_debits (reference, amount_kobo, status, failure_reason, created_at)
           select $2, amount_kobo, $3, $4, now() from installments where id = $1
           on conflict (reference) do update set status = excluded.status, failure_reason = excluded.failure_reason`,
          [
            id,
            r.pending_reference ?? `${id}:${r.attempts + 1}`,
            outcome === "SUCCESS" ? "SUCCESS" : "FAILED",
            outcome === "SUCCESS" ? null : code,
          ],
        );
        await sql(tx, "update installments set next_attempt_at = $2 where id = $1", [id, o.clock.now()]);
      });
      await o.repayments.collect(em, id);
      const rows = await o.repayments.list(em, caller, owned.disbursement_id);
      const found = rows.find((x) => x.id === id);
      if (!found) throw new ApiError("not_found", `No repayment ${id}.`);
      return found;
    },
  };
}
