import type { Consent, ConsentService } from "../consent/consent.service.ts";
import type { ConsentLinkService, LinkView } from "../consent/consent-link.service.ts";
import type { DisbursementService, Installment } from "../disbursements/disbursement.service.ts";
import type { MandateService } from "../disbursements/mandate.service.ts";
import type { RepaymentService } from "../disbursements/repayment.service.ts";
import type { IdempotencyService } from "../idempotency/idempotency.service.ts";
import type { LedgerService } from "../ledger/ledger.service.ts";
import type { Clock } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import type { Caller } from "../platform/tenancy.ts";
import type { StandingService } from "../standing/standing.service.ts";
import { type Tier, tiers } from "../standing/standing.service.ts";
import type { UserService } from "../users/user.service.ts";

/** `rpy_` + the disbursement's ULID + `_` + the installment's place in the schedule. */
const REPAYMENT_ID = /^rpy_[0-9A-HJKMNP-TV-Z]{26}_\d{1,2}$/;

/** What a sandbox reset removed. */
export interface SandboxReset {
  consents: number;
  consentLinks: number;
  disbursements: number;
  standings: number;
  ledgerEntries: number;
}

/** What {@link createSandboxService} returns. */
export type SandboxService = ReturnType<typeof createSandboxService>;

/** The services the sandbox helpers act through. */
interface SandboxDeps {
  clock: Clock;
  users: UserService;
  consents: ConsentService;
  consentLinks: ConsentLinkService;
  standing: StandingService;
  disbursements: DisbursementService;
  mandates: MandateService;
  repayments: RepaymentService;
  ledger: LedgerService;
  idempotency: IdempotencyService;
}

/** Refuses a live key: 403 `sandbox_only`, before anything else is looked at. */
function sandboxOnly(caller: Caller): void {
  if (caller.environment !== "sandbox") throw new ApiError("sandbox_only");
}

/**
 * The sandbox helpers (CONTRACT.md §7): they act for the people and systems a partner cannot drive from
 * outside, through the same services (and so the same transactions and events) as the real actions. Every
 * helper refuses a live key with 403 `sandbox_only` before it looks at anything else.
 */
export function createSandboxService(o: SandboxDeps) {
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
    async setStanding(em: Em, caller: Caller, userId: string, tier: string, score: number) {
      sandboxOnly(caller);
      return setStanding(o, em, caller.partnerId, userId, tier, score);
    },

    /**
     * Restores the caller's sandbox to its first day (CONTRACT.md §7); see {@link resetSandbox}. 409 while
     * something of its is at the payment provider.
     */
    async reset(em: Em, caller: Caller): Promise<SandboxReset> {
      sandboxOnly(caller);
      return resetSandbox(o, em, caller.partnerId);
    },

    /** The operator restores one partner's sandbox, as the partner's own reset does (`sandbox seed --partner`). */
    async resetPartner(em: Em, partnerId: string): Promise<SandboxReset> {
      return this.reset(em, { keyId: "", partnerId, environment: "sandbox" });
    },

    /** The person accepts or declines a disbursement's repayment mandate. */
    async decideMandate(em: Em, caller: Caller, id: string, accept: boolean): Promise<void> {
      sandboxOnly(caller);
      await o.mandates.decideInSandbox(em, id, accept);
    },

    /** The provider fails a payout still PENDING or PROCESSING. */
    async failDisbursement(em: Em, caller: Caller, id: string): Promise<void> {
      sandboxOnly(caller);
      await o.disbursements.failInSandbox(em, id);
    },

    /** The provider reverses a DELIVERED payout; what was already collected is refunded. */
    async reverseDisbursement(em: Em, caller: Caller, id: string): Promise<void> {
      sandboxOnly(caller);
      await o.disbursements.reverseInSandbox(em, id);
    },

    /** Runs the repayment's next debit now, with the outcome asked for. */
    async collectRepayment(
      em: Em,
      caller: Caller,
      id: string,
      outcome: "SUCCESS" | "FAILURE" | undefined,
      failureCode: string,
    ): Promise<Installment> {
      sandboxOnly(caller);
      if (!REPAYMENT_ID.test(id)) {
        if (!outcome) throw validationFailed({ outcome: "must be SUCCESS or FAILURE" });
        throw new ApiError("not_found", `No repayment ${id}.`);
      }
      return o.repayments.collectInSandbox(em, id, outcome, failureCode);
    },
  };
}

/** Re-scores a sandbox user for one partner, keeping the other standing signals. */
async function setStanding(
  o: SandboxDeps,
  em: Em,
  partnerId: string,
  userId: string,
  tier: string,
  score: number,
): Promise<{ tier: string; score: number; tierChanged: boolean }> {
  if ((await o.users.environmentOf(em, userId)) !== "sandbox")
    throw new ApiError("not_found", `No sandbox user ${userId}.`);
  if (!(tiers as readonly string[]).includes(tier))
    throw validationFailed({ tier: `must be one of ${tiers.join(", ")}` });
  const { tierChanged } = await o.standing.rescoreInSandbox(em, partnerId, userId, tier as Tier, score);
  return { tier, score, tierChanged };
}

/**
 * Restores a partner's sandbox to its first day (CONTRACT.md §7), in one transaction: its copy of the
 * sandbox users as documented (re-scores forgotten, the ledger lines and repayment history its loans wrote
 * removed), its consents, links, disbursements, books and idempotency records deleted. Keys, webhooks and
 * deliveries stay; no other partner is touched. 409 while something of its is at the payment provider.
 */
function resetSandbox(o: SandboxDeps, em: Em, partnerId: string): Promise<SandboxReset> {
  return em.transactional(async (tx) => {
    const disbursements = await o.disbursements.deleteSandbox(tx, partnerId);
    if (disbursements === false)
      throw new ApiError(
        "conflict",
        "A payout, debit or refund of yours is at the payment provider: reset once it has settled.",
      );
    const ledgerEntries = await o.ledger.deleteSandboxLines(tx, partnerId);
    const { consents, links } = await o.consents.deleteSandbox(tx, partnerId);
    const standings = await o.standing.resetSandbox(tx, partnerId);
    await o.idempotency.deleteSandbox(tx, partnerId);
    return { consents, consentLinks: links, disbursements, standings, ledgerEntries };
  });
}
