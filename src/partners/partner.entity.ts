import { defineEntity, type InferEntity, p } from "@mikro-orm/core";

/** A lending partner and its contract terms. */
export const PartnerEntity = defineEntity({
  name: "Partner",
  tableName: "partners",
  properties: {
    id: p.text().primary(),
    /** 1 to 200 characters. */
    name: p.text(),
    /** Fee on each disbursement in basis points of the principal (SPEC.md rule 6), 0 to 10000. */
    feeRateBps: p.integer(),
    createdAt: p.datetime(),
    /** The most the total repayable may exceed the principal, in basis points of the principal. */
    maxCostBps: p.integer().default(5000),
    /** The latest a last installment may fall, in days after creation. */
    maxTenorDays: p.integer().default(365),
  },
  checks: [
    { name: "partners_name_check", expression: "char_length(name) >= 1 and char_length(name) <= 200" },
    { name: "partners_fee_rate_bps_check", expression: "fee_rate_bps >= 0 and fee_rate_bps <= 10000" },
    { name: "partners_max_cost_bps_check", expression: "max_cost_bps >= 0 and max_cost_bps <= 100000" },
    { name: "partners_max_tenor_days_check", expression: "max_tenor_days >= 1 and max_tenor_days <= 1825" },
  ],
});

/** A partner row. */
export type Partner = InferEntity<typeof PartnerEntity>;
