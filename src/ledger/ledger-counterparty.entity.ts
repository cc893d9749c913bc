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
    // The scope rides along so a window's count is an index-only scan.
    {
      name: "ledger_counterparties_window",
      properties: ["userId", "direction", "lastDay"],
      include: ["scope"],
    },
  ],
});

/** A ledger counterparty row. */
export type LedgerCounterparty = InferEntity<typeof LedgerCounterpartyEntity>;
