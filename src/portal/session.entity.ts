import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { PortalMemberEntity } from "./member.entity.ts";

/** A signed-in browser: the cookie's token is kept as its SHA-256 only. */
export const PortalSessionEntity = defineEntity({
  name: "PortalSession",
  tableName: "portal_sessions",
  properties: {
    id: p.text().primary(),
    tokenHash: p.type("bytea").unique("portal_sessions_token_hash_key"),
    memberId: () =>
      p
        .manyToOne(PortalMemberEntity)
        .mapToPk()
        .fieldName("member_id")
        .foreignKeyName("portal_sessions_member_id_fkey"),
    partnerId: () =>
      p
        .manyToOne(PartnerEntity)
        .mapToPk()
        .fieldName("partner_id")
        .foreignKeyName("portal_sessions_partner_id_fkey"),
    createdAt: p.datetime(),
    /** Refreshed at most once a minute; 30 minutes after it, the session is over. */
    lastSeenAt: p.datetime(),
    /** 12 hours after sign-in, whatever happens. */
    expiresAt: p.datetime(),
    endedAt: p.datetime().nullable(),
  },
  indexes: [
    { name: "portal_sessions_by_member", properties: ["memberId"] },
    { name: "portal_sessions_by_expiry", properties: ["expiresAt"] },
  ],
});

/** A portal session row. */
export type PortalSessionRow = InferEntity<typeof PortalSessionEntity>;
