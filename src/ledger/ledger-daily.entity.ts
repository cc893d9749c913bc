import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { UserEntity } from "../users/user.entity.ts";

/**
 * The roll-up of one user's ledger for one UTC day, maintained at ingest: window totals and counts are a
 * range scan of at most 365 rows.
 */
export const LedgerDailyEntity = defineEntity({
  name: "LedgerDaily",
  tableName: "ledger_daily",
  properties: {
    userId: () =>
      p
        .manyToOne(UserEntity)
        .mapToPk()
        .primary()
        .fieldName("user_id")
        .foreignKeyName("ledger_daily_user_id_fkey"),
    /** The UTC day, `YYYY-MM-DD`. */
    day: p.date().primary(),
    /** `''`: the platform's own ledger. In sandbox, a partner's id: lines its collections and refunds wrote. */
    scope: p.text().primary().default(""),
    inflowKobo: p.bigint().defaultRaw("0"),
    inflowCount: p.integer().default(0),
    outflowKobo: p.bigint().defaultRaw("0"),
    outflowCount: p.integer().default(0),
  },
  indexes: [{ name: "ledger_daily_by_scope", properties: ["scope"], where: "scope <> ''" }],
});

/** A daily ledger roll-up row. */
export type LedgerDaily = InferEntity<typeof LedgerDailyEntity>;
