import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { UserEntity } from "../users/user.entity.ts";

/**
 * One user, direction and counterparty, with the first and last day they met. Windows end on the day of
 * the snapshot, so the distinct counterparties of a window are those whose last day falls inside it.
 */
export const LedgerCounterpartyEntity = defineEntity({
  name: "LedgerCounterparty",
  tableName: "ledger_counterparties",
  properties: {
    userId: () =>
      p
        .manyToOne(UserEntity)
        .mapToPk()
        .primary()
        .fieldName("user_id")
        .foreignKeyName("ledger_counterparties_user_id_fkey"),
    direction: p.enum(["IN", "OUT"] as const).primary(),
    /** HMAC-SHA-256 of `userId:counterpartyId` under the `counterparty-hash` data key. */
    counterpartyHash: p.type("bytea").primary(),
    /** As in `ledger_daily`. */
    scope: p.text().primary().default(""),
    /** UTC days, `YYYY-MM-DD`. */
    firstDay: p.date(),
    lastDay: p.date(),
  },
  indexes: [
    { name: "ledger_counterparties_by_scope", properties: ["scope"], where: "scope <> ''" },
    // A window's count within the caller's scopes is an index-only scan of exactly what it counts: the scopes
    // are searched in the index, not tested on every counterparty of the user.
    { name: "ledger_counterparties_by_window", properties: ["userId", "direction", "scope", "lastDay"] },
  ],
});

/** A ledger counterparty row. */
export type LedgerCounterparty = InferEntity<typeof LedgerCounterpartyEntity>;
