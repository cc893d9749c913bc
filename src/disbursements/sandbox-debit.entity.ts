import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/** The sandbox payment provider's own record of a direct debit, keyed by our reference (idempotent). */
export const SandboxDebitEntity = defineEntity({
  name: "SandboxDebit",
  tableName: "sandbox_debits",
  properties: {
    reference: p.text().primary(),
    amountKobo: p.bigint(),
    status: p.enum(["SUCCESS", "FAILED"] as const),
    failureReason: p.text().nullable(),
    createdAt: p.datetime(),
  },
  // The retention purge finds records left without their loan by age.
  indexes: [{ name: "sandbox_debits_by_age", properties: ["createdAt"] }],
});

/** A sandbox debit row. */
export type SandboxDebit = InferEntity<typeof SandboxDebitEntity>;
