import type { Clock } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import { FIXTURE_LENDER_ID } from "../platform/tenancy.ts";
import type { Partner } from "./partner.entity.ts";
import { partnerRepository as repo } from "./partner.repository.ts";

/** A partner's fee rate and lending caps (CONTRACT.md §6). */
export interface LendingTerms {
  feeRateBps: number;
  /** The most the total repayable may exceed the principal, in basis points of the principal. */
  maxCostBps: number;
  /** The latest a last installment may fall, in days after creation. */
  maxTenorDays: number;
}

/** The caps a partner has until the operator sets its own. */
export const DEFAULT_TERMS = { maxCostBps: 5_000, maxTenorDays: 365 } as const;

/**
 * The longest tenor any partner may be given: five years. A debit job is queued at acceptance for each
 * installment's due date, so this also bounds how far ahead any job is scheduled (never year 9999). The
 * database holds it too (`partners_max_tenor_days_check`).
 */
export const MAX_TENOR_DAYS_CEILING = 1825;

/** Options for {@link createPartnerService}. */
export interface PartnerServiceOptions {
  clock: Clock;
}

/** What {@link createPartnerService} returns. */
export type PartnerService = ReturnType<typeof createPartnerService>;

function checkFee(feeRateBps: number): void {
  if (!Number.isInteger(feeRateBps) || feeRateBps < 0 || feeRateBps > 10_000) {
    throw validationFailed({ feeRateBps: "must be an integer from 0 to 10000 basis points" });
  }
}

/** Partners and their contract fee rates. */
export function createPartnerService({ clock }: PartnerServiceOptions) {
  return {
    /** Creates a partner. */
    async create(em: Em, name: string, feeRateBps: number): Promise<Partner> {
      const trimmed = name.trim();
      if (trimmed.length < 1 || trimmed.length > 200) {
        throw validationFailed({ name: "must be 1 to 200 characters" });
      }
      checkFee(feeRateBps);
      return repo.insert(em, {
        id: newId("ptn"),
        name: trimmed,
        feeRateBps,
        createdAt: clock.now(),
        maxCostBps: DEFAULT_TERMS.maxCostBps,
        maxTenorDays: DEFAULT_TERMS.maxTenorDays,
      });
    },

    /** The partners, oldest first; the sandbox fixture lender (a record, never a caller) is left out. */
    async list(em: Em): Promise<Partner[]> {
      return repo.list(em, FIXTURE_LENDER_ID);
    },

    /** A partner, or `not_found`. */
    async get(em: Em, partnerId: string): Promise<Partner> {
      const partner = isId("ptn", partnerId) ? await repo.find(em, partnerId) : null;
      if (!partner) throw new ApiError("not_found", `No partner ${partnerId}.`);
      return partner;
    },

    /** A partner's current fee rate and lending caps, checked and fixed as a disbursement is created. */
    async lendingTerms(em: Em, partnerId: string): Promise<LendingTerms> {
      const terms = await repo.lendingTerms(em, partnerId);
      if (!terms) throw new ApiError("not_found", `No partner ${partnerId}.`);
      return terms;
    },

    /** Sets a partner's lending caps for disbursements created from now on. */
    async setTerms(em: Em, partnerId: string, maxCostBps: number, maxTenorDays: number): Promise<Partner> {
      const problems: Record<string, string> = {};
      if (!Number.isInteger(maxCostBps) || maxCostBps < 0 || maxCostBps > 100_000)
        problems.maxCostBps = "must be an integer from 0 to 100000 basis points";
      if (!Number.isInteger(maxTenorDays) || maxTenorDays < 1 || maxTenorDays > MAX_TENOR_DAYS_CEILING)
        problems.maxTenorDays = `must be an integer from 1 to ${MAX_TENOR_DAYS_CEILING} days`;
      if (Object.keys(problems).length) throw validationFailed(problems);
      const partner = isId("ptn", partnerId) ? await repo.find(em, partnerId) : null;
      if (!partner) throw new ApiError("not_found", `No partner ${partnerId}.`);
      Object.assign(partner, { maxCostBps, maxTenorDays });
      await repo.save(em);
      return partner;
    },

    /** Creates a partner with a fixed id unless it exists (the sandbox's fixture lender, a record, never a caller). */
    async ensure(em: Em, partner: Partner): Promise<void> {
      await repo.insertIfMissing(em, partner);
    },

    /** The names of partners, by id (the dashboard lists whom a user consented to). */
    async names(em: Em, partnerIds: string[]): Promise<Map<string, string>> {
      return repo.names(em, [...new Set(partnerIds)]);
    },

    /** Sets a partner's fee rate for disbursements created from now on. */
    async setFee(em: Em, partnerId: string, feeRateBps: number): Promise<Partner> {
      checkFee(feeRateBps);
      const partner = isId("ptn", partnerId) ? await repo.find(em, partnerId) : null;
      if (!partner) throw new ApiError("not_found", `No partner ${partnerId}.`);
      partner.feeRateBps = feeRateBps;
      await repo.save(em);
      return partner;
    },
  };
}
