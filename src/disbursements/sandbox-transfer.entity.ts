import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/**
 * The sandbox payment provider's own record of a payout, keyed by our reference: asking it twice for the
 * same reference returns the first transfer, as a real provider's idempotent reference does. The simulator
 * can hold a transfer PENDING or reverse it.
 */
export const SandboxTransferEntity = defineEntity({
  name: "SandboxTransfer",
  tableName: "sandbox_transfers",
  properties: {
    reference: p.text().primary(),
    amountKobo: p.bigint(),
    status: p.enum(["SUCCESS", "FAILED", "PENDING", "REVERSED"] as const),
    failureReason: p.text().nullable(),
    createdAt: p.datetime(),
  },
  // The retention purge finds records left without their loan by age.
  indexes: [{ name: "sandbox_transfers_by_age", properties: ["createdAt"] }],
});

/** A sandbox transfer row. */
export type SandboxTransfer = InferEntity<typeof SandboxTransferEntity>;
