import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { roles } from "./roles.ts";

/**
 * An invitation to a partner's team: single use, 72 hours. While the invitee enrols, it also holds the
 * password hash and the sealed TOTP secret they chose, which become the member's at confirmation.
 */
export const PortalInviteEntity = defineEntity({
  name: "PortalInvite",
  tableName: "portal_invites",
  properties: {
    id: p.text().primary(),
    partnerId: () =>
      p
        .manyToOne(PartnerEntity)
        .mapToPk()
        .fieldName("partner_id")
        .foreignKeyName("portal_invites_partner_id_fkey"),
    email: p.text(),
    role: p.enum(roles),
    /** SHA-256 of the URL's token. */
    tokenHash: p.type("bytea").unique("portal_invites_token_hash_key"),
    /** `mbr_` id of the admin who invited, or `operator`. */
    invitedBy: p.text(),
    createdAt: p.datetime(),
    expiresAt: p.datetime(),
    usedAt: p.datetime().nullable(),
    passwordHash: p.text().nullable(),
    /** Sealed (associated data `portal-invite-totp:<id>`). */
    totpEnc: p.type("bytea").nullable(),
    /** Wrong codes given to ConfirmEnrolment; at {@link MAX_WRONG_CODES} the invite is spent. */
    wrongCodes: p.integer().fieldName("wrong_codes").default(0),
  },
  indexes: [{ name: "portal_invites_by_expiry", properties: ["expiresAt"] }],
});

/** Wrong enrolment codes an invite takes before it is spent and a new one must be asked for. */
export const MAX_WRONG_CODES = 10;

/** A portal invite row. */
export type PortalInviteRow = InferEntity<typeof PortalInviteEntity>;
