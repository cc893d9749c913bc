import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { DisbursementEntity } from "./disbursement.entity.ts";

/** One repayment of a disbursement, collected by direct debit when due. */
export const InstallmentEntity = defineEntity({
  name: "Installment",
  tableName: "installments",
  properties: {
    id: p.text().primary(),
    disbursementId: () =>
      p
        .manyToOne(DisbursementEntity)
        .mapToPk()
        .fieldName("disbursement_id")
        .foreignKeyName("installments_disbursement_id_fkey"),
    /** 1 for the first installment of the disbursement. */
    seq: p.integer(),
    /** `YYYY-MM-DD`. */
    dueDate: p.date(),
    /** Positive kobo. */
    amountKobo: p.bigint(),
    status: p.enum(["SCHEDULED", "COLLECTED", "FAILED", "CANCELLED"] as const),
    /** Collection attempts so far. */
    attempts: p.integer().default(0),
    nextAttemptAt: p.datetime().nullable(),
    lastFailure: p.text().nullable(),
    collectedAt: p.datetime().nullable(),
    failedAt: p.datetime().nullable(),
    /**
     * The provider reference of a debit sent and not yet settled. While it is set, every retry (after a
     * crash, a time-out or a pending answer) asks the provider about it instead of charging anew.
     */
    pendingReference: p.text().nullable(),
    /** The provider reference of the charge that collected it (what a refund is made against). */
    collectedReference: p.text().nullable(),
    /**
     * A refund owed once the payout was reversed after this was collected (CONTRACT.md §6): PENDING until the
     * provider has refunded it (REFUNDED), or FAILED when the provider refused it. Null: nothing is owed.
     */
    refundStatus: p.enum(["PENDING", "REFUNDED", "FAILED"] as const).nullable(),
    /** Our reference for the refund (`rfd_…`), set when it is owed. */
    refundReference: p.text().nullable(),
    /**
     * While PENDING, when the refund may next be attempted: null before the first attempt, the end of the
     * running attempt's lease, or when a refund the provider has not settled is asked about again.
     */
    refundNextAttemptAt: p.datetime().nullable(),
    refundedAt: p.datetime().nullable(),
    /** Why the provider refused the refund (a stable code), when FAILED. */
    refundFailure: p.text().nullable(),
  },
  checks: [{ name: "installments_amount_kobo_check", expression: "amount_kobo > 0" }],
  uniques: [
    { name: "installments_disbursement_id_seq_key", properties: ["disbursementId", "seq"] },
    // A unique index, not a constraint: MikroORM declares `uniques` as constraints, so it is given whole.
    {
      name: "installments_pending_reference",
      expression: "create unique index installments_pending_reference on installments (pending_reference)",
    },
    {
      name: "installments_collected_reference",
      expression:
        "create unique index installments_collected_reference on installments (collected_reference)",
    },
    {
      name: "installments_refund_reference",
      expression: "create unique index installments_refund_reference on installments (refund_reference)",
    },
  ],
  indexes: [
    { name: "installments_due", properties: ["nextAttemptAt"], where: "status = 'SCHEDULED'" },
    {
      name: "installments_refunds_due",
      properties: ["refundNextAttemptAt"],
      where: "refund_status = 'PENDING'",
    },
  ],
});

/** An installment row. */
export type Installment = InferEntity<typeof InstallmentEntity>;
