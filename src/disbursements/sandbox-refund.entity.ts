import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/**
 * The sandbox payment provider's own record of a refund, keyed by our refund reference, at most one per charge
 * it refunds (as a real provider refuses to refund a charge twice over).
 */
export const SandboxRefundEntity = defineEntity({
  name: "SandboxRefund",
  tableName: "sandbox_refunds",
  properties: {
    reference: p.text().primary(),
    /** The debit's reference (`rpy_…:<attempt>`) this refund returns. */
    chargeReference: p.text(),
    amountKobo: p.bigint(),
    status: p.enum(["SUCCESS", "FAILED"] as const),
    failureReason: p.text().nullable(),
    createdAt: p.datetime(),
  },
  // The retention purge finds records left without their loan by age.
  indexes: [{ name: "sandbox_refunds_by_age", properties: ["createdAt"] }],
  uniques: [{ name: "sandbox_refunds_charge_reference_key", properties: ["chargeReference"] }],
});

/** A sandbox refund row. */
export type SandboxRefund = InferEntity<typeof SandboxRefundEntity>;
