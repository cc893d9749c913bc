import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { environments, tenantFilter } from "../platform/tenancy.ts";
import { UserEntity } from "../users/user.entity.ts";

/** How a person proved who they were before a decision (CONTRACT.md §4). */
export const authMethods = ["OTP_SMS", "PLATFORM_SESSION", "DASHBOARD"] as const;
/** One of {@link authMethods}. */
export type AuthMethod = (typeof authMethods)[number];

/**
 * A user's consent to share data with a partner. At most one is ACTIVE per person, partner and environment:
 * a new grant supersedes the old one.
 */
export const ConsentEntity = defineEntity({
  name: "Consent",
  tableName: "consents",
  filters: tenantFilter,
  properties: {
    id: p.text().primary(),
    partnerId: () =>
      p.manyToOne(PartnerEntity).mapToPk().fieldName("partner_id").foreignKeyName("consents_partner_id_fkey"),
    environment: p.enum(environments),
    userId: () =>
      p.manyToOne(UserEntity).mapToPk().fieldName("user_id").foreignKeyName("consents_user_id_fkey"),
    status: p.enum(["ACTIVE", "REVOKED", "EXPIRED"] as const),
    /** What the partner may read (at least one scope). */
    scopes: p.array(),
    /** Days of ledger a snapshot covers by default, 1 to `maxLedgerWindowDays`. */
    ledgerWindowDays: p.integer(),
    /** The most a partner may ask for, up to 365. */
    maxLedgerWindowDays: p.integer(),
    source: p.enum(["DASHBOARD", "CONSENT_LINK"] as const),
    grantedAt: p.datetime(),
    expiresAt: p.datetime(),
    revokedAt: p.datetime().nullable(),
    revokedBy: p.enum(["USER", "PARTNER", "SYSTEM"] as const).nullable(),
    /** The consent that replaced this one. */
    supersededBy: () =>
      p
        .manyToOne(ConsentEntity)
        .mapToPk()
        .nullable()
        .deleteRule("no action")
        .fieldName("superseded_by")
        .foreignKeyName("consents_superseded_by_fkey"),
    /** How the person proved who they were (null on consents written before evidence was kept). */
    authMethod: p.enum(authMethods).nullable(),
    authenticatedAt: p.datetime().nullable(),
    /** `{ ip, userAgent }` of the decision, sealed under the master key, bound to the consent (operators only). */
    evidenceEnc: p.type("bytea").nullable(),
    /** SHA-256 of the exact terms the person was shown (see `termsHash`). */
    termsHash: p.type("bytea").nullable(),
  },
  checks: [
    { name: "consents_scopes_check", expression: "cardinality(scopes) > 0" },
    {
      name: "consents_ledger_window_days_check",
      expression: "ledger_window_days >= 1 and ledger_window_days <= 365",
    },
    {
      name: "consents_check",
      expression: "max_ledger_window_days >= ledger_window_days and max_ledger_window_days <= 365",
    },
  ],
  uniques: [
    {
      name: "consents_one_active",
      properties: ["partnerId", "environment", "userId"],
      where: "status = 'ACTIVE'",
    },
  ],
  indexes: [
    { name: "consents_by_user", columns: [{ name: "userId" }, { name: "grantedAt", sort: "desc" }] },
    {
      name: "consents_by_owner",
      columns: [
        { name: "partnerId" },
        { name: "environment" },
        { name: "userId" },
        { name: "grantedAt", sort: "desc" },
      ],
    },
    { name: "consents_expiring", properties: ["expiresAt"], where: "status = 'ACTIVE'" },
    // ListConsents: one tenant's consents newest first, all or in one status.
    { name: "consents_by_owner_id", properties: ["partnerId", "environment", "id"] },
    { name: "consents_by_owner_status", properties: ["partnerId", "environment", "status", "id"] },
    { name: "consents_active_standing", properties: ["userId"], where: "status = 'ACTIVE'" },
  ],
});

/** A consent row. */
export type Consent = InferEntity<typeof ConsentEntity>;
