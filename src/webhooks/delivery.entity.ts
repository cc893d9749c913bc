import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { environments, tenantFilter } from "../platform/tenancy.ts";
import { WebhookEntity } from "./webhook.entity.ts";

/**
 * One event to one subscription. The delivery row is the truth about a delivery; a queued job is only a
 * wake-up. It is due while PENDING or FAILED (and then has a `nextAttemptAt`), and done when DELIVERED or
 * GIVEN_UP.
 */
export const WebhookDeliveryEntity = defineEntity({
  name: "WebhookDelivery",
  tableName: "webhook_deliveries",
  filters: tenantFilter,
  properties: {
    id: p.text().primary(),
    /**
     * The event delivered. No foreign key: events and deliveries are monthly partitions dropped whole
     * (webhook-partition.repository.ts), which a key between them would forbid; retention keeps them consistent.
     */
    eventId: p.text().fieldName("event_id"),
    webhookId: () =>
      p
        .manyToOne(WebhookEntity)
        .mapToPk()
        .fieldName("webhook_id")
        .foreignKeyName("webhook_deliveries_webhook_id_fkey"),
    partnerId: () =>
      p
        .manyToOne(PartnerEntity)
        .mapToPk()
        .fieldName("partner_id")
        .foreignKeyName("webhook_deliveries_partner_id_fkey"),
    environment: p.enum(environments),
    status: p.enum(["PENDING", "FAILED", "DELIVERED", "GIVEN_UP"] as const),
    /** Attempts made so far. */
    attempts: p.integer().default(0),
    /** The outcome of the last attempt. */
    lastStatusCode: p.integer().nullable(),
    lastError: p.text().nullable(),
    lastResponseBody: p.text().nullable(),
    lastLatencyMs: p.integer().nullable(),
    /** When the next attempt is due; set exactly while the status is PENDING or FAILED. */
    nextAttemptAt: p.datetime().nullable(),
    /** A worker holds the delivery until then (a crashed worker's claim lapses). */
    lockedUntil: p.datetime().nullable(),
    firstAttemptAt: p.datetime().nullable(),
    deliveredAt: p.datetime().nullable(),
    givenUpAt: p.datetime().nullable(),
    createdAt: p.datetime(),
    /**
     * The delivery this one replays, when a partner asked for a replay (no foreign key, as for `eventId`: the
     * replayed delivery may be past retention and gone before its replay).
     */
    replayOf: p.text().nullable().fieldName("replay_of"),
  },
  checks: [
    {
      name: "webhook_deliveries_check",
      expression: "(status in ('PENDING', 'FAILED')) = (next_attempt_at is not null)",
    },
  ],
  indexes: [
    // Given whole: MikroORM 7.2.1 reads the sort of `id` from inside `webhook_id` when it introspects this
    // index (it matches the column name as a substring), so a structured `id desc` never compares equal.
    {
      name: "deliveries_by_webhook",
      expression: "create index deliveries_by_webhook on webhook_deliveries (webhook_id, id desc)",
    },
    // A subscription's deliveries in given statuses (the portal's filter, replay of the failed ones).
    {
      name: "deliveries_by_webhook_status",
      expression:
        "create index deliveries_by_webhook_status on webhook_deliveries (webhook_id, status, id desc)",
    },
    { name: "deliveries_by_event", properties: ["eventId"] },
    { name: "deliveries_due", properties: ["nextAttemptAt"], where: "status in ('PENDING', 'FAILED')" },
    // Replays of a delivery (the retention purge deletes them first, and checks `replay_of` on every delete).
    { name: "deliveries_by_replay_of", properties: ["replayOf"], where: "replay_of is not null" },
  ],
});

/** A webhook delivery row. */
export type WebhookDelivery = InferEntity<typeof WebhookDeliveryEntity>;
