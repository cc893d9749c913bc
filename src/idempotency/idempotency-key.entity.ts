import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { environments, tenantFilter } from "../platform/tenancy.ts";

/** A used Idempotency-Key and the response it got, scoped to the partner and environment and kept 7 days (CONTRACT.md §8). */
export const IdempotencyKeyEntity = defineEntity({
  name: "IdempotencyKey",
  tableName: "idempotency_keys",
  filters: tenantFilter,
  properties: {
    partnerId: () =>
      p
        .manyToOne(PartnerEntity)
        .mapToPk()
        .primary()
        .fieldName("partner_id")
        .foreignKeyName("idempotency_keys_partner_id_fkey"),
    environment: p.enum(environments).primary(),
    /** The key as the partner sent it. */
    key: p.text().primary(),
    /** The RPC method it was used on. */
    method: p.text(),
    /** SHA-256 of the request: the same key with another request is refused. */
    requestHash: p.type("bytea"),
    /** The response, sealed under the master key (it can hold a new webhook's secret). */
    response: p.type("bytea"),
    createdAt: p.datetime(),
    expiresAt: p.datetime(),
  },
  indexes: [{ name: "idempotency_keys_expiry", properties: ["expiresAt"] }],
});

/** An idempotency key row. */
export type IdempotencyKey = InferEntity<typeof IdempotencyKeyEntity>;
