import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { UserEntity } from "../users/user.entity.ts";

/**
 * A raw ledger entry as the platform sent it, kept for idempotency (by the platform's id) and audits.
 * Snapshot reads never scan these: they read the daily roll-ups.
 */
export const LedgerEntryEntity = defineEntity({
  name: "LedgerEntry",
  tableName: "ledger_entries",
  properties: {
    /** The platform's id of the entry. */
    id: p.text().primary(),
    userId: () =>
      p.manyToOne(UserEntity).mapToPk().fieldName("user_id").foreignKeyName("ledger_entries_user_id_fkey"),
    /** Positive kobo; `direction` gives the sign. */
    amountKobo: p.bigint(),
    direction: p.enum(["IN", "OUT"] as const),
    /** HMAC-SHA-256 of `userId:counterpartyId` under the `counterparty-hash` data key. */
    counterpartyHash: p.type("bytea"),
    /** One of the channels the platform reports (`transfer`, `card`, `pos`, `ussd`, `wallet`, `other`). */
    channel: p.text(),
    occurredAt: p.datetime(),
    /** The UTC day of `occurredAt`, `YYYY-MM-DD`. */
    day: p.date(),
    /**
     * `''`: the platform's own ledger. In sandbox, the id of the partner whose collection or refund wrote it, so
     * only that partner's snapshots count it (each sandbox partner has its own copy of the sandbox users).
     */
    scope: p.text().default(""),
  },
  checks: [{ name: "ledger_entries_amount_kobo_check", expression: "amount_kobo > 0" }],
  indexes: [
    { name: "ledger_entries_by_scope", properties: ["scope"], where: "scope <> ''" },
    { name: "ledger_entries_by_user_day", properties: ["userId", "day"] },
  ],
});

/** A ledger entry row. */
export type LedgerEntry = InferEntity<typeof LedgerEntryEntity>;
