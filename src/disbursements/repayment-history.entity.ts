import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { UserEntity } from "../users/user.entity.ts";

/**
 * The settled part of one user's repayment history in one lender scope, maintained whenever a loan or an
 * installment settles, so a snapshot reads it instead of every loan. The scope is `''` in production (history
 * spans every lender) and the lending partner's id in sandbox (each sandbox partner sees only its own loans and
 * the fixture lender's).
 */
export const RepaymentHistoryEntity = defineEntity({
  name: "RepaymentHistory",
  tableName: "repayment_histories",
  properties: {
    userId: () =>
      p
        .manyToOne(UserEntity)
        .mapToPk()
        .primary()
        .fieldName("user_id")
        .foreignKeyName("repayment_histories_user_id_fkey"),
    lenderScope: p.text().primary(),
    /** Delivered loans. */
    loansTaken: p.integer().default(0),
    /** Delivered loans with every installment collected. */
    loansRepaid: p.integer().default(0),
    /** Delivered loans with an installment still scheduled. */
    loansActive: p.integer().default(0),
    borrowedKobo: p.bigint().defaultRaw("0"),
    repaidKobo: p.bigint().defaultRaw("0"),
    /** Installments collected. */
    collected: p.integer().default(0),
    /** Installments collected on or before their due date (UTC). */
    onTime: p.integer().default(0),
    /** The most days any collected installment was late. */
    maxDaysLateCollected: p.integer().default(0),
    lastRepaymentAt: p.datetime().nullable(),
  },
  indexes: [
    { name: "repayment_histories_by_scope", properties: ["lenderScope"], where: "lender_scope <> ''" },
  ],
});

/** A repayment history roll-up row. */
export type RepaymentHistory = InferEntity<typeof RepaymentHistoryEntity>;

/**
 * The installments of delivered loans not collected, per user, lender scope and due date: what the snapshot
 * needs of them on the day it is read (how many have fallen due, and the oldest still owed).
 */
export const RepaymentDueEntity = defineEntity({
  name: "RepaymentDue",
  tableName: "repayment_dues",
  properties: {
    userId: () =>
      p
        .manyToOne(UserEntity)
        .mapToPk()
        .primary()
        .fieldName("user_id")
        .foreignKeyName("repayment_dues_user_id_fkey"),
    lenderScope: p.text().primary(),
    dueDate: p.date().primary(),
    /** Installments not collected (cancelled ones included: they fell due and were never paid). */
    dueCount: p.integer(),
    /** Of those, the ones still owed (not cancelled). */
    openCount: p.integer(),
  },
  indexes: [{ name: "repayment_dues_by_scope", properties: ["lenderScope"], where: "lender_scope <> ''" }],
});

/** A repayment dues roll-up row. */
export type RepaymentDue = InferEntity<typeof RepaymentDueEntity>;
