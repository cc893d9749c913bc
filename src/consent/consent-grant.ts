import { ms } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import { sha256 } from "../platform/crypto/tokens.ts";
import type { Em } from "../platform/db/orm.ts";
import { inTransaction } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import type { Environment } from "../platform/tenancy.ts";
import type { AuthMethod, Consent } from "./consent.entity.ts";
import { consentRepository as repo } from "./consent.repository.ts";
import type { ConsentServiceOptions } from "./consent.service.ts";
import { scopes as allScopes, isScope } from "./scopes.ts";

/** What a grant asks for, checked by {@link checkGrantTerms}. */
export interface GrantTerms {
  scopes: string[];
  ledgerWindowDays: number;
  /** 0 means "the same as ledgerWindowDays". */
  maxLedgerWindowDays: number;
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

/** A grant: its terms, whose consent it is, where it comes from, and its evidence. */
export type GrantInput = GrantTerms & {
  partnerId: string;
  environment: Environment;
  userId: string;
  source: "DASHBOARD" | "CONSENT_LINK";
  expiresAt?: Date | undefined;
  /** How the person proved who they were, and what they were shown. */
  evidence: ConsentEvidence;
};

/** Where the decision came from, sealed to the consent (operators only); nothing when neither is known. */
function sealedEvidence(box: SecretBox, consentId: string, evidence: ConsentEvidence): Buffer | null {
  if (!evidence.ip && !evidence.userAgent) return null;
  const where = JSON.stringify({ ip: evidence.ip ?? "", userAgent: evidence.userAgent ?? "" });
  return box.seal(Buffer.from(where), evidenceAad(consentId));
}

/** The `consent.granted` event's payload; `supersedes` names the consent it replaced, if any. */
function grantedPayload(consent: Consent, previous: Consent | null | undefined) {
  return {
    consentId: consent.id,
    userId: consent.userId,
    scopes: consent.scopes,
    ledgerWindowDays: consent.ledgerWindowDays,
    maxLedgerWindowDays: consent.maxLedgerWindowDays,
    source: consent.source,
    grantedAt: consent.grantedAt.toISOString(),
    expiresAt: consent.expiresAt.toISOString(),
    ...(previous ? { supersedes: [previous.id] } : {}),
  };
}

/**
 * Writes a consent and raises `consent.granted`, in the caller's transaction if there is one. The
 * user's previous ACTIVE consent for the partner is superseded (REVOKED by SYSTEM, `supersededBy` set).
 */
export async function grantConsent(
  { clock, box, outbox, users, partners }: ConsentServiceOptions,
  em: Em,
  input: GrantInput,
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
      evidenceEnc: sealedEvidence(box, id, input.evidence),
      termsHash: sha256(input.evidence.terms),
    });
    if (previous) {
      previous.supersededBy = id;
      await repo.save(tx);
    }
    await outbox.raise(tx, {
      ...tenant,
      type: "consent.granted",
      subject: { userId: consent.userId, objectId: consent.id },
      payload: grantedPayload(consent, previous),
    });
    return consent;
  });
}
