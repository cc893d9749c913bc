import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { environments, tenantFilter } from "../platform/tenancy.ts";
import { UserEntity } from "../users/user.entity.ts";

/** One installment as the person was shown it and accepted it. */
export interface AcceptedInstallment {
  dueDate: string;
  /** Kobo, as a decimal string (JSON has no 64-bit integers). */
  amountKobo: string;
}

/** Disbursement statuses (CONTRACT.md §6). */
export const disbursementStatuses = [
  "AWAITING_ACCEPTANCE",
  "PENDING",
  "PROCESSING",
  "DELIVERED",
  "FAILED",
  "REVERSED",
  "CANCELLED",
] as const;

/**
 * A loan paid out to a user on a partner's behalf: AWAITING_ACCEPTANCE until the person accepts its repayment
 * mandate (or CANCELLED), PENDING until a payout job takes it, PROCESSING while the provider moves the money,
 * then DELIVERED or FAILED (and REVERSED if a delivered payout comes back).
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
    status: p.enum(disbursementStatuses),
    /** Positive kobo. */
    principalKobo: p.bigint(),
    /** `principalKobo × feeRateBps / 10000`, in kobo (SPEC.md rule 6). */
    feeKobo: p.bigint(),
    /** The partner's fee rate when the disbursement was made, 0 to 10000. */
    feeRateBps: p.integer(),
    destination: p.enum(["WALLET", "BANK"] as const),
    /** The partner's reference: one disbursement per partner, environment and reference. */
    reference: p.text(),
    /** When the person accepted the repayment mandate (null until then). */
    scheduleAcceptedAt: p.datetime().nullable(),
    failureReason: p.text().nullable(),
    /** The name of the payment provider that pays it out. */
    provider: p.text(),
    createdAt: p.datetime(),
    processingAt: p.datetime().nullable(),
    deliveredAt: p.datetime().nullable(),
    failedAt: p.datetime().nullable(),
    reversedAt: p.datetime().nullable(),
    /** SHA-256 of the mandate page's token (the token itself is in the URL only, and sealed below). */
    acceptanceTokenHash: p.type("bytea").nullable(),
    /** The mandate page's token, sealed and bound to the disbursement, so `GET` can show the URL again. */
    acceptanceTokenEnc: p.type("bytea").nullable(),
    /** When an unanswered mandate lapses (CANCELLED, `mandate_expired`). */
    acceptanceExpiresAt: p.datetime().nullable(),
    /** How the person proved who they were before accepting. */
    acceptanceMethod: p.enum(["OTP_SMS", "PLATFORM_SESSION"] as const).nullable(),
    /** The schedule exactly as the person accepted it: the debit authority. */
    acceptedSchedule: p.json<AcceptedInstallment[]>().nullable(),
    /** The total the person accepted: the debits of the disbursement never exceed it. */
    acceptedTotalKobo: p.bigint().nullable(),
    /** `{ ip, userAgent }` of the acceptance, sealed and bound to the disbursement (operators only). */
    acceptanceEvidenceEnc: p.type("bytea").nullable(),
    /** SHA-256 of the exact terms the mandate page showed. */
    acceptanceTermsHash: p.type("bytea").nullable(),
    cancelledAt: p.datetime().nullable(),
    /** The `traceparent` of the call that created it, for the work that follows to continue its trace. */
    traceParent: p.text().nullable(),
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
    {
      name: "disbursements_acceptance_token",
      expression:
        "create unique index disbursements_acceptance_token on disbursements (acceptance_token_hash) where acceptance_token_hash is not null",
    },
  ],
  indexes: [
    { name: "disbursements_by_user", properties: ["userId"] },
    // The per-user daily limit's count: one partner's disbursements for one user since midnight in Lagos.
    {
      name: "disbursements_by_owner_user_day",
      properties: ["partnerId", "environment", "userId", "createdAt"],
    },
    {
      name: "disbursements_awaiting",
      properties: ["acceptanceExpiresAt"],
      where: "status = 'AWAITING_ACCEPTANCE'",
    },
    // ListDisbursements: one tenant's disbursements newest first, all or in one stored status.
    { name: "disbursements_by_owner_id", properties: ["partnerId", "environment", "id"] },
    { name: "disbursements_by_owner_status", properties: ["partnerId", "environment", "status", "id"] },
    // Sandbox disbursements by age, for the retention purge (production ones are never purged).
    { name: "disbursements_sandbox_by_age", properties: ["createdAt"], where: "environment = 'sandbox'" },
  ],
});

/** A disbursement row. */
export type Disbursement = InferEntity<typeof DisbursementEntity>;
