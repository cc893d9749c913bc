import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { WebhookEntity } from "./webhook.entity.ts";

/** One HTTP attempt of a delivery, kept for the partner's delivery log (old ones are pruned hourly). */
export const WebhookAttemptEntity = defineEntity({
  name: "WebhookAttempt",
  tableName: "webhook_attempts",
  properties: {
    /**
     * The delivery attempted: the partition key (attempts are monthly partitions by their delivery's id, dropped
     * with it; no foreign key, webhook-partition.repository.ts), first in the primary key.
     */
    deliveryId: p.text().primary().fieldName("delivery_id"),
    /** `bigint generated always as identity`: the database numbers attempts. */
    id: p.bigint().primary().autoincrement().generated("identity"),
    webhookId: () =>
      p
        .manyToOne(WebhookEntity)
        .mapToPk()
        .fieldName("webhook_id")
        .foreignKeyName("webhook_attempts_webhook_id_fkey"),
    /** 1 for the first attempt of the delivery. */
    attempt: p.integer(),
    startedAt: p.datetime(),
    /** A 2xx answer. */
    succeeded: p.boolean(),
    /** The HTTP status, if an answer came. */
    statusCode: p.integer().nullable(),
    /** Why it failed without an answer (time-out, refused, …). */
    error: p.text().nullable(),
    latencyMs: p.integer(),
    /** The first 4 KiB of the receiver's answer. */
    responseBody: p.text().nullable(),
    /** The signature headers sent, by lower-case name (null for attempts recorded before they were kept). */
    signatureHeaders: p.json<Record<string, string>>().nullable(),
  },
  indexes: [
    { name: "attempts_by_delivery", properties: ["deliveryId", "attempt"] },
    { name: "attempts_by_webhook_time", properties: ["webhookId", "startedAt"] },
  ],
});

/** A webhook attempt row. */
export type WebhookAttempt = InferEntity<typeof WebhookAttemptEntity>;
