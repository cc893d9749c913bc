import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { environments, tenantFilter } from "../platform/tenancy.ts";
import { ConsentEntity } from "./consent.entity.ts";

/**
 * A link a partner sends a person to ask for consent. The person is known only by the keyed hash of the
 * phone number the partner gave; the consent is granted when they accept.
 */
export const ConsentLinkEntity = defineEntity({
  name: "ConsentLink",
  tableName: "consent_links",
  filters: tenantFilter,
  properties: {
    id: p.text().primary(),
    partnerId: () =>
      p
        .manyToOne(PartnerEntity)
        .mapToPk()
        .fieldName("partner_id")
        .foreignKeyName("consent_links_partner_id_fkey"),
    environment: p.enum(environments),
    /** SHA-256 of the link's token: the page finds the link by it. */
    tokenHash: p.type("bytea").unique("consent_links_token_hash_key"),
    /** The token sealed under the master key, so the partner can be shown the link again. */
    tokenEnc: p.type("bytea"),
    /** HMAC-SHA-256 of the phone number under the `phone-hash` data key. */
    phoneHash: p.type("bytea"),
    phoneLast4: p.text(),
    /** The scopes and windows the consent will have. */
    scopes: p.array(),
    ledgerWindowDays: p.integer(),
    maxLedgerWindowDays: p.integer(),
    /** Where the page sends the person when they have decided. */
    redirectUrl: p.text().nullable(),
    /** LOCKED: too many wrong one-time codes on its page; it can no longer be decided. */
    status: p.enum(["PENDING", "ACCEPTED", "DECLINED", "LOCKED"] as const),
    /** The consent granted when the link was accepted. */
    consentId: () =>
      p
        .manyToOne(ConsentEntity)
        .mapToPk()
        .nullable()
        .deleteRule("no action")
        .fieldName("consent_id")
        .foreignKeyName("consent_links_consent_id_fkey"),
    expiresAt: p.datetime(),
    decidedAt: p.datetime().nullable(),
    createdAt: p.datetime(),
  },
  indexes: [
    { name: "consent_links_by_owner", properties: ["partnerId", "environment", "createdAt"] },
    // ListConsentLinks: one tenant's links newest first.
    { name: "consent_links_by_owner_id", properties: ["partnerId", "environment", "id"] },
    // When a link ended (decided, else expired): the retention purge's search.
    {
      name: "consent_links_by_end",
      expression: "create index consent_links_by_end on consent_links ((coalesce(decided_at, expires_at)))",
    },
  ],
});

/** A consent link row. */
export type ConsentLink = InferEntity<typeof ConsentLinkEntity>;
