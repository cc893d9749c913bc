import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { environments, tenantFilter } from "../platform/tenancy.ts";

/** A partner's webhook subscription: where to POST which events, and the secrets that sign them. */
export const WebhookEntity = defineEntity({
  name: "Webhook",
  tableName: "webhooks",
  filters: tenantFilter,
  properties: {
    id: p.text().primary(),
    partnerId: () =>
      p.manyToOne(PartnerEntity).mapToPk().fieldName("partner_id").foreignKeyName("webhooks_partner_id_fkey"),
    environment: p.enum(environments),
    url: p.text(),
    description: p.text().default(""),
    /** Event types and filters it subscribes to (at least one). */
    events: p.array(),
    status: p.enum(["ACTIVE", "DISABLED"] as const),
    /** Why the service disabled it (the endpoint answered 410 Gone); cleared when a new URL revives it. */
    disabledReason: p.text().nullable(),
    /** The signing secret, sealed under the master key. */
    secretEnc: p.type("bytea"),
    /** The secret before the last rotation, still signing until `previousSecretExpiresAt`. */
    previousSecretEnc: p.type("bytea").nullable(),
    previousSecretExpiresAt: p.datetime().nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    /** Consecutive failed attempts (errors, time-outs, non-2xx); a success resets it. */
    failureStreak: p.integer().default(0),
    /** When the circuit opened (the streak reached the threshold); null while it is closed. */
    circuitOpenedAt: p.datetime().nullable(),
    /**
     * While the circuit is open, deliveries wait until then; then one probe may go (it holds the circuit
     * until its attempt ends). Null while the circuit is closed.
     */
    circuitOpenUntil: p.datetime().nullable(),
    /** Deleted subscriptions are kept (their deliveries point at them) and hidden. */
    deletedAt: p.datetime().nullable(),
  },
  checks: [{ name: "webhooks_events_check", expression: "cardinality(events) > 0" }],
  indexes: [
    {
      name: "webhooks_by_owner",
      properties: ["partnerId", "environment", "createdAt"],
      where: "deleted_at is null",
    },
    // Deleted subscriptions, for the retention purge.
    { name: "webhooks_deleted", properties: ["deletedAt"], where: "deleted_at is not null" },
  ],
});

/** A webhook subscription row. */
export type Webhook = InferEntity<typeof WebhookEntity>;
