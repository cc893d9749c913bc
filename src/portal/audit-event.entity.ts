import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";

/**
 * One entry of a partner's portal audit log: who, what, when, from where. The client's address and user
 * agent are sealed, as the consent evidence is; nothing secret is ever written here.
 */
export const PortalAuditEventEntity = defineEntity({
  name: "PortalAuditEvent",
  tableName: "portal_audit_events",
  properties: {
    id: p.text().primary(),
    partnerId: () =>
      p
        .manyToOne(PartnerEntity)
        .mapToPk()
        .fieldName("partner_id")
        .foreignKeyName("portal_audit_events_partner_id_fkey"),
    /** `mbr_` id, `operator`, or '' (a failed sign-in). */
    actor: p.text(),
    actorEmail: p.text(),
    action: p.text(),
    /** The id acted on, or ''. */
    target: p.text(),
    /** `ok` or an error code. */
    outcome: p.text(),
    /** `sandbox`, `production` or ''. */
    environment: p.text(),
    /** The method of an API call; the new role of a role change; else ''. */
    detail: p.text(),
    /** `{ address, userAgent }`, sealed (associated data `portal-audit:<id>`). */
    evidenceEnc: p.type("bytea"),
    createdAt: p.datetime(),
  },
  indexes: [
    // Read newest first: a backward scan of (partner_id, id), ids being time-ordered ULIDs.
    { name: "portal_audit_events_by_partner", properties: ["partnerId", "id"] },
    { name: "portal_audit_events_by_age", properties: ["createdAt"] },
  ],
});

/** A portal audit event row. */
export type PortalAuditEventRow = InferEntity<typeof PortalAuditEventEntity>;
