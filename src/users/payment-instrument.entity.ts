import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { UserEntity } from "./user.entity.ts";

/**
 * A user's payment instruments as the platform holds them: provider codes for the bank account, wallet and
 * direct-debit authorisation, sealed under the master key. The flags say what is on file without opening it.
 */
export const PaymentInstrumentEntity = defineEntity({
  name: "PaymentInstrument",
  tableName: "payment_instruments",
  properties: {
    userId: () =>
      p
        .manyToOne(UserEntity)
        .mapToPk()
        .primary()
        .fieldName("user_id")
        .foreignKeyName("payment_instruments_user_id_fkey")
        // Without these, MikroORM would cascade a primary-key relation; the table does not.
        .deleteRule("no action")
        .updateRule("no action"),
    /** The instruments as JSON, sealed under the master key and bound to the user. */
    sealed: p.type("bytea"),
    hasBank: p.boolean(),
    hasWallet: p.boolean(),
    hasDebit: p.boolean(),
    updatedAt: p.datetime(),
  },
});

/** A payment instruments row. */
export type PaymentInstrument = InferEntity<typeof PaymentInstrumentEntity>;
