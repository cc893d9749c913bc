import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { UserEntity } from "../users/user.entity.ts";

/**
 * One user, direction and counterparty, with the first and last day they met. Windows end on the day of
 * the snapshot, so the distinct counterparties of a window are those whose last day falls inside it: counted
 * in `ledger_counterparty_days` (how many of a user's counterparties were last met on each day), which the
 * fold moves a row's count in whenever it moves the row's last day.
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
    /**
     * The last day before the fold's latest change of this row (null when that change made it): returned by
     * the fold's upsert, whose `returning` sees only the new row, to move the row's count in
     * `ledger_counterparty_days` from that day to its new last day. Read by nothing else.
     */
    previousLastDay: p.date().nullable(),
  },
  indexes: [{ name: "ledger_counterparties_by_scope", properties: ["scope"], where: "scope <> ''" }],
});

/** A ledger counterparty row. */
export type LedgerCounterparty = InferEntity<typeof LedgerCounterpartyEntity>;

/**
 * How many of a user's counterparties in one direction and ledger scope were last met on one UTC day: a
 * window's distinct counterparties are the sum of its days' rows (at most one a day), not a count of every
 * counterparty (a heavy trader has thousands). Kept by the fold in the statement that moves the counterparties
 * (ledger.repository.ts); a day whose counterparties have all moved on keeps its row at 0 until a rebuild.
 */
export const LedgerCounterpartyDayEntity = defineEntity({
  name: "LedgerCounterpartyDay",
  tableName: "ledger_counterparty_days",
  properties: {
    userId: () =>
      p
        .manyToOne(UserEntity)
        .mapToPk()
        .primary()
        .fieldName("user_id")
        .foreignKeyName("ledger_counterparty_days_user_id_fkey"),
    direction: p.enum(["IN", "OUT"] as const).primary(),
    /** As in `ledger_daily`. */
    scope: p.text().primary().default(""),
    /** The UTC day, `YYYY-MM-DD`. */
    lastDay: p.date().primary(),
    parties: p.integer(),
  },
  indexes: [{ name: "ledger_counterparty_days_by_scope", properties: ["scope"], where: "scope <> ''" }],
});

/** A row of {@link LedgerCounterpartyDayEntity}. */
export type LedgerCounterpartyDay = InferEntity<typeof LedgerCounterpartyDayEntity>;
