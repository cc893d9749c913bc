import type { PartnerService } from "../partners/partner.service.ts";
import type { Clock } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction } from "../platform/db/sql.ts";
import { ApiError } from "../platform/errors.ts";
import { isId } from "../platform/ids.ts";
import { pageOf, pageSize, unknownCursor } from "../platform/paging.ts";
import type { Tenant } from "../platform/tenancy.ts";
import type { UserService } from "../users/user.service.ts";
import type { Outbox } from "../webhooks/outbox.service.ts";
import type { Consent } from "./consent.entity.ts";
import { consentRepository as repo } from "./consent.repository.ts";
import { type GrantInput, grantConsent } from "./consent-grant.ts";
import type { Scope } from "./scopes.ts";

export {
  type ConsentEvidence,
  checkGrantTerms,
  DEFAULT_CONSENT_MS,
  evidenceAad,
  type GrantInput,
  type GrantTerms,
} from "./consent-grant.ts";
export type { Consent, Scope };

/**
 * The 403 a read or a disbursement gets under the user's newest consent (CONTRACT.md §3), or undefined
 * when it is ACTIVE and unexpired. Checked against `now`, so an expiry the job has not processed yet counts.
 */
export function consentRefusal(
  consent: { status: string; expiresAt: Date | string } | undefined | null,
  now: Date,
): "consent_required" | "consent_revoked" | "consent_expired" | undefined {
  if (!consent) return "consent_required";
  if (consent.status === "REVOKED") return "consent_revoked";
  if (consent.status === "EXPIRED" || new Date(consent.expiresAt).getTime() <= now.getTime())
    return "consent_expired";
  return undefined;
}

/** What {@link createConsentService} returns. */
export type ConsentService = ReturnType<typeof createConsentService>;

/** What {@link createConsentService} is built from. */
export interface ConsentServiceOptions {
  clock: Clock;
  box: SecretBox;
  outbox: Outbox;
  users: UserService;
  partners: PartnerService;
}

/** A consent of the caller's; another partner's or environment's is simply not found: ids do not leak. */
async function owned(em: Em, id: string, lock = false): Promise<Consent> {
  const row = isId("cns", id) ? await repo.findConsent(em, id, lock) : null;
  if (!row) throw new ApiError("not_found", `No consent ${id}.`);
  return row;
}

/** Ends a consent (locked by the caller) and raises `consent.revoked`; one already ended is returned as it is. */
async function end(
  { clock, outbox }: ConsentServiceOptions,
  tx: Em,
  row: Consent,
  by: "USER" | "PARTNER" | "SYSTEM",
  status: "REVOKED" | "EXPIRED",
): Promise<Consent> {
  if (row.status !== "ACTIVE") return row;
  row.status = status;
  row.revokedAt = clock.now();
  row.revokedBy = by;
  await repo.save(tx);
  await outbox.raise(tx, {
    partnerId: row.partnerId,
    environment: row.environment,
    type: "consent.revoked",
    subject: { userId: row.userId, objectId: row.id },
    payload: {
      consentId: row.id,
      userId: row.userId,
      revokedBy: row.revokedBy,
      revokedAt: row.revokedAt?.toISOString(),
      status: row.status,
    },
  });
  return row;
}

/** Consent records (CONTRACT.md §4): grant, revoke, read, expire; every change raises its event. */
export function createConsentService(o: ConsentServiceOptions) {
  const { clock, partners } = o;
  return {
    /** Deletes a partner's sandbox consents and consent links (the sandbox reset), in the caller's transaction. */
    deleteSandbox(tx: Em, partnerId: string): Promise<{ consents: number; links: number }> {
      return repo.deleteSandbox(tx, partnerId);
    },

    /**
     * Writes a consent and raises `consent.granted`, in the caller's transaction if there is one. The
     * user's previous ACTIVE consent for the partner is superseded (REVOKED by SYSTEM, `supersededBy` set).
     */
    grant: (em: Em, input: GrantInput): Promise<Consent> => grantConsent(o, em, input),

    /** The partner ends one of its consents. */
    async revokeByPartner(em: Em, id: string): Promise<Consent> {
      return inTransaction(em, async (tx) => end(o, tx, await owned(tx, id, true), "PARTNER", "REVOKED"));
    },

    /** The person ends a consent from the dashboard. */
    async revokeByUser(em: Em, id: string): Promise<Consent> {
      return inTransaction(em, async (tx) => {
        const row = isId("cns", id) ? await repo.findConsentForUser(tx, id) : null;
        if (!row) throw new ApiError("not_found", `No consent ${id}.`);
        return end(o, tx, row, "USER", "REVOKED");
      });
    },

    /** A consent of the caller's. */
    async get(em: Em, id: string): Promise<Consent> {
      return owned(em, id);
    },

    /**
     * A page of the caller's consents, newest first, after `startingAfter` (one of the caller's own), in a
     * status and of a user when asked (CONTRACT.md §1).
     */
    async list(
      em: Em,
      filter: { status?: Consent["status"]; userId?: string },
      page: { limit: number; startingAfter: string },
    ) {
      if (page.startingAfter && !(await repo.findConsent(em, page.startingAfter)))
        throw unknownCursor("consents");
      const limit = pageSize(page.limit);
      const rows = await repo.listConsents(em, filter, page.startingAfter || undefined, limit + 1);
      return pageOf(rows, limit);
    },

    /** The newest consent the user gave the caller, whatever its status. */
    async newestForUser(em: Em, userId: string): Promise<Consent> {
      const row = await repo.newestConsent(em, userId);
      if (!row) throw new ApiError("not_found", `No consent from user ${userId}.`);
      return row;
    },

    /**
     * Throws the contract's 403 unless the user's newest consent to the tenant is ACTIVE and unexpired
     * (CONTRACT.md §3); what other features ask before they act on a user's data.
     */
    async assertActive(em: Em, tenant: Tenant, userId: string): Promise<void> {
      const refusal = consentRefusal(await repo.newestConsentState(em, tenant, userId), clock.now());
      if (refusal) throw new ApiError(refusal);
    },

    /** The partners (and environments) holding an ACTIVE consent of the user that covers `scope`. */
    holders(em: Em, userId: string, scope: Scope): Promise<Tenant[]> {
      return repo.holders(em, userId, scope, clock.now());
    },

    /** Every consent of a user, newest first, with the partner's name (the dashboard's list). */
    async listForUser(em: Em, userId: string): Promise<(Consent & { partnerName: string })[]> {
      const rows = await repo.consentsOfUser(em, userId);
      const names = await partners.names(
        em,
        rows.map((r) => r.partnerId),
      );
      return rows.map((r) => Object.assign(r, { partnerName: names.get(r.partnerId) ?? "" }));
    },

    /** Expires consents past `expiresAt`, each with `consent.revoked` (`revokedBy: SYSTEM`). */
    async expireDue(em: Em, limit = 500): Promise<number> {
      return em.transactional(async (tx) => {
        const due = await repo.dueToExpire(tx, clock.now(), limit);
        for (const row of due) await end(o, tx, row, "SYSTEM", "EXPIRED");
        return due.length;
      });
    },
  };
}
