import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { roles } from "./roles.ts";

/**
 * A person of a partner's team, who signs in to the portal. The password is kept as an scrypt hash with its
 * parameters, the TOTP secret sealed under the master key, the recovery codes as SHA-256 digests.
 */
export const PortalMemberEntity = defineEntity({
  name: "PortalMember",
  tableName: "portal_members",
  properties: {
    id: p.text().primary(),
    partnerId: () =>
      p
        .manyToOne(PartnerEntity)
        .mapToPk()
        .fieldName("partner_id")
        .foreignKeyName("portal_members_partner_id_fkey"),
    /** Lower case. */
    email: p.text(),
    role: p.enum(roles),
    /** `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>` (base64url): the parameters travel with the hash. */
    passwordHash: p.text(),
    /** The TOTP secret, sealed (associated data `portal-member-totp:<id>`). */
    totpEnc: p.type("bytea"),
    /** The last 30-second step a code was accepted for: a code is never accepted twice. */
    totpLastStep: p.integer(),
    /** The unused recovery codes' SHA-256 digests, 32 bytes each, end to end. */
    recoveryHashes: p.type("bytea"),
    createdAt: p.datetime(),
    removedAt: p.datetime().nullable(),
  },
  uniques: [
    // One active membership per email across the service, so sign-in by email is unambiguous.
    { name: "portal_members_one_active_email", properties: ["email"], where: "removed_at is null" },
  ],
  indexes: [{ name: "portal_members_by_partner", properties: ["partnerId", "createdAt"] }],
});

/** A portal member row. */
export type PortalMemberRow = InferEntity<typeof PortalMemberEntity>;
