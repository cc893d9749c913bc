import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { environments, tenantFilter } from "../platform/tenancy.ts";

/**
 * The operator's override of a partner's limits in one environment (`keyId` ''), or of one API key's buckets
 * (`keyId` the key's id): dedicated capacity (CONTRACT.md §8). A null column follows the level above, the
 * partner's row and then the service's defaults. Only the limits service reads or writes it.
 */
export const LimitOverrideEntity = defineEntity({
  name: "LimitOverride",
  tableName: "limit_overrides",
  filters: tenantFilter,
  properties: {
    partnerId: () =>
      p
        .manyToOne(PartnerEntity)
        .mapToPk()
        .primary()
        .fieldName("partner_id")
        .foreignKeyName("limit_overrides_partner_id_fkey")
        .deleteRule("no action")
        .updateRule("no action"),
    environment: p.enum(environments).primary(),
    /** '' for the partner's own row in the environment; else the `key_` id whose buckets it sets. */
    keyId: p.text().primary().default(""),
    readCapacity: p.integer().nullable(),
    readRefillPerSecond: p.decimal().precision(7).scale(2).nullable(),
    writeCapacity: p.integer().nullable(),
    writeRefillPerSecond: p.decimal().precision(7).scale(2).nullable(),
    snapshotConcurrency: p.integer().nullable(),
    disbursementsPerUserPerDay: p.integer().nullable(),
    updatedAt: p.datetime(),
  },
  // Written as PostgreSQL gives them back (MikroORM compares the expressions): a bucket is set whole, within
  // the caps of limits.ts, and a key overrides only its buckets.
  checks: [
    {
      name: "limit_overrides_read_check",
      expression:
        "(read_capacity is null) = (read_refill_per_second is null) and (read_capacity is null or " +
        "(read_capacity >= 1 and read_capacity <= 100000 and read_refill_per_second >= 0.01 and read_refill_per_second <= 10000))",
    },
    {
      name: "limit_overrides_write_check",
      expression:
        "(write_capacity is null) = (write_refill_per_second is null) and (write_capacity is null or " +
        "(write_capacity >= 1 and write_capacity <= 100000 and write_refill_per_second >= 0.01 and write_refill_per_second <= 10000))",
    },
    {
      name: "limit_overrides_snapshot_concurrency_check",
      expression: "snapshot_concurrency >= 1 and snapshot_concurrency <= 1000",
    },
    {
      name: "limit_overrides_disbursements_per_user_per_day_check",
      expression: "disbursements_per_user_per_day >= 1 and disbursements_per_user_per_day <= 10000",
    },
    {
      name: "limit_overrides_key_check",
      expression: "key_id = '' or (snapshot_concurrency is null and disbursements_per_user_per_day is null)",
    },
  ],
});

/** A limit override row. */
export type LimitOverrideRow = InferEntity<typeof LimitOverrideEntity>;
