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
    /** A synthetic test event (a test send). */
    test: p.boolean().default(false),
    createdAt: p.datetime(),
  },
  indexes: [
    { name: "events_by_owner", properties: ["partnerId", "environment", "createdAt"] },
    // The retention purge's search, oldest first.
    { name: "events_by_age", properties: ["createdAt"] },
  ],
});

/** An event row. */
export type Event = InferEntity<typeof EventEntity>;
