import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { environments, tenantFilter } from "../platform/tenancy.ts";

/** An event in the outbox: the exact body POSTed is stored once, at the moment the event is raised. */
export const EventEntity = defineEntity({
  name: "Event",
  tableName: "events",
  filters: tenantFilter,
  properties: {
    id: p.text().primary(),
    partnerId: () =>
      p.manyToOne(PartnerEntity).mapToPk().fieldName("partner_id").foreignKeyName("events_partner_id_fkey"),
    environment: p.enum(environments),
    /** The event type, such as `consent.granted`. */
    type: p.text(),
    /** The JSON body, byte for byte as every delivery sends and signs it. */
    body: p.text(),
    /**
     * The user the event is about (`usr_…`), for ListEvents' `user_id`; null for test sends and for events
     * raised before the column was added.
     */
    userId: p.text().nullable().fieldName("user_id"),
    /**
     * The disbursement (`dsb_…`) or consent (`cns_…`) the event reports, for ListEvents' `object_id`; null when
     * it is about a user alone (standing), for test sends, and for events raised before the column was added.
     */
    objectId: p.text().nullable().fieldName("object_id"),
    /** A synthetic test event (a test send). */
    test: p.boolean().default(false),
    createdAt: p.datetime(),
  },
  indexes: [
    { name: "events_by_owner", properties: ["partnerId", "environment", "createdAt"] },
    // The retention purge's search, oldest first.
    { name: "events_by_age", properties: ["createdAt"] },
    // ListEvents about one user or one object: a range of the index in the list's order, whatever the
    // tenant's other events (only rows that name a subject are indexed).
    {
      name: "events_by_user",
      properties: ["partnerId", "environment", "userId", "createdAt", "id"],
      where: "user_id is not null",
    },
    {
      name: "events_by_object",
      properties: ["partnerId", "environment", "objectId", "createdAt", "id"],
      where: "object_id is not null",
    },
  ],
});

/** An event row. */
export type Event = InferEntity<typeof EventEntity>;
