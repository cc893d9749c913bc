import type { PartnerService } from "../partners/partner.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { sha256 } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId, newId } from "../platform/ids.ts";
import { pageOf, pageSize, unknownCursor } from "../platform/paging.ts";
import type { Environment, Tenant } from "../platform/tenancy.ts";
import type { UserService } from "../users/user.service.ts";
import type { Outbox } from "../webhooks/outbox.service.ts";
import type { AuthMethod, Consent } from "./consent.entity.ts";
import { consentRepository as repo } from "./consent.repository.ts";
import { scopes as allScopes, isScope, type Scope } from "./scopes.ts";

export type { Consent };

/** What a grant asks for, checked by {@link checkGrantTerms}. */
export interface GrantTerms {
  scopes: string[];
  ledgerWindowDays: number;
  /** 0 means "the same as ledgerWindowDays". */
  maxLedgerWindowDays: number;
}

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

/** Binds a consent's sealed evidence to the consent. */
export const evidenceAad = (consentId: string) => `consent-evidence:${consentId}`;

/** What is kept of how a consent was given (CONTRACT.md §4). */
export interface ConsentEvidence {
  method: AuthMethod;
  /** When the person proved who they were (unset: as the consent is written). */
  at?: Date | undefined;
  /** Where the decision came from (sealed; operators only). */
  ip?: string | undefined;
  userAgent?: string | undefined;
  /** The exact terms shown, as text; only its SHA-256 is kept. */
  terms: string;
}

/** A consent lasts a year unless the grant says otherwise. */
export const DEFAULT_CONSENT_MS = 365 * ms.day;

/** Checks scopes and windows (CONTRACT.md §3–4) and returns them normalised. */
export function checkGrantTerms(t: GrantTerms): {
  scopes: string[];
  ledgerWindowDays: number;
  maxLedgerWindowDays: number;
} {
  const unknown = t.scopes.filter((s) => !isScope(s));
  if (unknown.length) {
    throw new ApiError(
      "invalid_scope",
      `Unknown scope ${unknown.map((s) => JSON.stringify(s)).join(", ")}.`,
      {
        details: { invalid: unknown, scopes: [...allScopes] },
      },
    );
  }
  if (t.scopes.length === 0) throw validationFailed({ scopes: "ask for at least one scope" });
  const max = t.maxLedgerWindowDays || t.ledgerWindowDays;
  const problems: Record<string, string> = {};
  if (!Number.isInteger(t.ledgerWindowDays) || t.ledgerWindowDays < 1 || t.ledgerWindowDays > 365) {
    problems.ledgerWindowDays = "must be 1 to 365 days";
  }
  if (!Number.isInteger(max) || max < 1 || max > 365) problems.maxLedgerWindowDays = "must be 1 to 365 days";
  else if (max < t.ledgerWindowDays) problems.maxLedgerWindowDays = "must be at least ledgerWindowDays";
  if (Object.keys(problems).length) throw validationFailed(problems);
  // In the contract's order, once each.
  const ordered = allScopes.filter((s) => t.scopes.includes(s));
  return { scopes: ordered, ledgerWindowDays: t.ledgerWindowDays, maxLedgerWindowDays: max };
}

/** What {@link createConsentService} returns. */
export type ConsentService = ReturnType<typeof createConsentService>;

/** Consent records (CONTRACT.md §4): grant, revoke, read, expire; every change raises its event. */
export function createConsentService({
  clock,
  outbox,
  users,
  partners,
  box,
}: {
  clock: Clock;
  box: SecretBox;
  outbox: Outbox;
  users: UserService;
  partners: PartnerService;
}) {
  const revokedPayload = (c: Consent) => ({
    consentId: c.id,
    userId: c.userId,
    revokedBy: c.revokedBy,
    revokedAt: c.revokedAt?.toISOString(),
    status: c.status,
  });

  /** A consent of the caller's; another partner's or environment's is simply not found: ids do not leak. */
  const owned = async (em: Em, id: string, lock = false): Promise<Consent> => {
    const row = isId("cns", id) ? await repo.findConsent(em, id, lock) : null;
    if (!row) throw new ApiError("not_found", `No consent ${id}.`);
    return row;
  };

  /** Ends a consent (locked by the caller) and raises `consent.revoked`; one already ended is returned as it is. */
  const end = async (
    tx: Em,
    row: Consent,
    by: "USER" | "PARTNER" | "SYSTEM",
    status: "REVOKED" | "EXPIRED",
  ): Promise<Consent> => {
    if (row.status !== "ACTIVE") return row;
    row.status = status;
    row.revokedAt = clock.now();
    row.revokedBy = by;
    await repo.save(tx);
    await outbox.raise(tx, {
      partnerId: row.partnerId,
      environment: row.environment,
      type: "consent.revoked",
      payload: revokedPayload(row),
    });
    return row;
  };

  return {
    /** Deletes a partner's sandbox consents and consent links (the sandbox reset), in the caller's transaction. */
    deleteSandbox(tx: Em, partnerId: string): Promise<{ consents: number; links: number }> {
      return repo.deleteSandbox(tx, partnerId);
    },

    /**
     * Writes a consent and raises `consent.granted`, in the caller's transaction if there is one. The
     * user's previous ACTIVE consent for the partner is superseded (REVOKED by SYSTEM, `supersededBy` set).
     */
    async grant(
      em: Em,
      input: GrantTerms & {
        partnerId: string;
        environment: Environment;
        userId: string;
        source: "DASHBOARD" | "CONSENT_LINK";
        expiresAt?: Date | undefined;
        /** How the person proved who they were, and what they were shown. */
        evidence: ConsentEvidence;
      },
    ): Promise<Consent> {
      const terms = checkGrantTerms(input);
      const now = clock.now();
      const expiresAt = input.expiresAt ?? new Date(now.getTime() + DEFAULT_CONSENT_MS);
      if (expiresAt <= now) throw validationFailed({ expiresAt: "must be in the future" });
      const tenant = { partnerId: input.partnerId, environment: input.environment };
      return inTransaction(em, async (tx) => {
        if ((await users.environmentOf(tx, input.userId)) !== input.environment)
          throw new ApiError("not_found", `No user ${input.userId}.`);
        await partners.get(tx, input.partnerId);
        await repo.lockGrants(tx, tenant, input.userId);
        const previous = await repo.activeConsent(tx, tenant, input.userId);
        const id = newId("cns");
        if (previous) {
          // Out of the one-active index before the new one enters it.
          Object.assign(previous, { status: "REVOKED", revokedAt: now, revokedBy: "SYSTEM" });
          await repo.save(tx);
        }
        const consent = await repo.insertConsent(tx, {
          id,
          ...tenant,
          userId: input.userId,
          status: "ACTIVE",
          scopes: terms.scopes,
          ledgerWindowDays: terms.ledgerWindowDays,
          maxLedgerWindowDays: terms.maxLedgerWindowDays,
          source: input.source,
          grantedAt: now,
          expiresAt,
          revokedAt: null,
          revokedBy: null,
          supersededBy: null,
          authMethod: input.evidence.method,
          authenticatedAt: input.evidence.at ?? now,
          evidenceEnc:
            input.evidence.ip || input.evidence.userAgent
              ? box.seal(
                  Buffer.from(
                    JSON.stringify({
                      ip: input.evidence.ip ?? "",
                      userAgent: input.evidence.userAgent ?? "",
                    }),
                  ),
                  evidenceAad(id),
                )
              : null,
          termsHash: sha256(input.evidence.terms),
        });
        if (previous) {
          previous.supersededBy = id;
          await repo.save(tx);
        }
        await outbox.raise(tx, {
          ...tenant,
          type: "consent.granted",
          payload: {
            consentId: consent.id,
            userId: consent.userId,
            scopes: consent.scopes,
            ledgerWindowDays: consent.ledgerWindowDays,
            maxLedgerWindowDays: consent.maxLedgerWindowDays,
            source: consent.source,
            grantedAt: consent.grantedAt.toISOString(),
            expiresAt: consent.expiresAt.toISOString(),
            ...(previous ? { supersedes: [previous.id] } : {}),
          },
        });
        return consent;
      });
    },

    /** The partner ends one of its consents. */
    async revokeByPartner(em: Em, id: string): Promise<Consent> {
      return inTransaction(em, async (tx) => end(tx, await owned(tx, id, true), "PARTNER", "REVOKED"));
    },

    /** The person ends a consent from the dashboard. */
    async revokeByUser(em: Em, id: string): Promise<Consent> {
      return inTransaction(em, async (tx) => {
        const row = isId("cns", id) ? await repo.findConsentForUser(tx, id) : null;
        if (!row) throw new ApiError("not_found", `No consent ${id}.`);
        return end(tx, row, "USER", "REVOKED");
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
        for (const row of due) await end(tx, row, "SYSTEM", "EXPIRED");
        return due.length;
      });
    },
  };
}
