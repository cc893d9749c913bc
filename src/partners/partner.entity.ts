import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/** A lending partner and its contract terms. */
export const PartnerEntity = defineEntity({
  name: "Partner",
  tableName: "partners",
  properties: {
    id: p.string().primary(),
    name: p.string(),
    /** Fee on each disbursement in basis points of the principal (SPEC.md rule 6). */
    feeRateBps: p.integer(),
    createdAt: p.datetime(),
  },
});

/** A partner row. */
export type Partner = InferEntity<typeof PartnerEntity>;
