import { defineEntity, type InferEntity, p } from "@mikro-orm/core";
import { PartnerEntity } from "../partners/partner.entity.ts";
import { environments, tenantFilter } from "../platform/tenancy.ts";
import { DisbursementEntity } from "./disbursement.entity.ts";
import { InstallmentEntity } from "./installment.entity.ts";

/** One movement in a partner's books: a signed amount in kobo (out negative), booked once. */
export const BookEntryEntity = defineEntity({
  name: "BookEntry",
  tableName: "book_entries",
  filters: tenantFilter,
  properties: {
    /** `bigint generated always as identity`: the database numbers entries. */
    id: p.bigint().primary().autoincrement().generated("identity"),
    partnerId: () =>
      p
        .manyToOne(PartnerEntity)
        .mapToPk()
        .fieldName("partner_id")
        .foreignKeyName("book_entries_partner_id_fkey"),
    environment: p.enum(environments),
    disbursementId: () =>
      p
        .manyToOne(DisbursementEntity)
        .mapToPk()
        .fieldName("disbursement_id")
        .foreignKeyName("book_entries_disbursement_id_fkey"),
    /** The installment a repayment collected (or refunded); null for the payout's own entries. */
    installmentId: () =>
      p
        .manyToOne(InstallmentEntity)
        .mapToPk()
        .nullable()
        .deleteRule("no action")
        .fieldName("installment_id")
        .foreignKeyName("book_entries_installment_id_fkey"),
    kind: p.enum([
      "PRINCIPAL_OUT",
      "FEE",
      "REPAYMENT_IN",
      "PRINCIPAL_REVERSED",
      "FEE_REVERSED",
      "REPAYMENT_REFUND",
    ] as const),
    /** Signed kobo: money out of the partner's books is negative. */
    amountKobo: p.bigint(),
    bookedAt: p.datetime(),
  },
  uniques: [
    // Each movement is booked once, whatever retries happen. An expression index: given whole.
    {
      name: "book_entries_once",
      expression:
        "create unique index book_entries_once on book_entries (disbursement_id, kind, coalesce(installment_id, ''))",
    },
  ],
  indexes: [
    { name: "book_entries_by_owner", properties: ["partnerId", "environment", "bookedAt"] },
    // The reference check of `installment_id` when the retention purge deletes a sandbox installment.
    {
      name: "book_entries_by_installment",
      properties: ["installmentId"],
      where: "installment_id is not null",
    },
  ],
});

/** A book entry row. */
export type BookEntry = InferEntity<typeof BookEntryEntity>;
