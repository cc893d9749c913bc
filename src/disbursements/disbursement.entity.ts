import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { environments, tenantFilter } from "../platform/tenancy.ts";
import { UserEntity } from "../users/user.entity.ts";

/**
 * A loan paid out to a user on a partner's behalf: PENDING until a payout job takes it, PROCESSING while the
 * provider moves the money, then DELIVERED or FAILED (and REVERSED if a delivered payout comes back).
 */
export const DisbursementEntity = defineEntity({
  name: "Disbursement",
  tableName: "disbursements",
  filters: tenantFilter,
  properties: {
    id: p.text().primary(),
    partnerId: () =>
      p
        .manyToOne(PartnerEntity)
        .mapToPk()
        .fieldName("partner_id")
        .foreignKeyName("disbursements_partner_id_fkey"),
    environment: p.enum(environments),
    userId: () =>
      p.manyToOne(UserEntity).mapToPk().fieldName("user_id").foreignKeyName("disbursements_user_id_fkey"),
    status: p.enum(["PENDING", "PROCESSING", "DELIVERED", "FAILED", "REVERSED"] as const),
    /** Positive kobo. */
    principalKobo: p.bigint(),
    /** `principalKobo × feeRateBps / 10000`, in kobo (SPEC.md rule 6). */
    feeKobo: p.bigint(),
    /** The partner's fee rate when the disbursement was made, 0 to 10000. */
    feeRateBps: p.integer(),
    destination: p.enum(["WALLET", "BANK"] as const),
    /** The partner's reference: one disbursement per partner, environment and reference. */
    reference: p.text(),
    /** When the user accepted the repayment schedule. */
    scheduleAcceptedAt: p.datetime(),
    failureReason: p.text().nullable(),
    /** The name of the payment provider that pays it out. */
    provider: p.text(),
    createdAt: p.datetime(),
    processingAt: p.datetime().nullable(),
    deliveredAt: p.datetime().nullable(),
    failedAt: p.datetime().nullable(),
    reversedAt: p.datetime().nullable(),
  },
  checks: [
    { name: "disbursements_principal_kobo_check", expression: "principal_kobo > 0" },
    { name: "disbursements_fee_kobo_check", expression: "fee_kobo >= 0" },
    { name: "disbursements_fee_rate_bps_check", expression: "fee_rate_bps >= 0 and fee_rate_bps <= 10000" },
  ],
  uniques: [
    // A unique index, not a constraint: MikroORM declares `uniques` as constraints, so it is given whole.
    {
      name: "disbursements_reference",
      expression:
        "create unique index disbursements_reference on disbursements (partner_id, environment, reference)",
    },
  ],
  indexes: [{ name: "disbursements_by_user", properties: ["userId"] }],
});

/** A disbursement row. */
export type Disbursement = InferEntity<typeof DisbursementEntity>;
