import { Migration } from "@mikro-orm/migrations";

/**
 * Refunds of repayments collected before a payout was reversed (CONTRACT.md §6): on each installment, the
 * provider charge that collected it, and the refund owed against it (its status, our reference, when the next
 * attempt may be made, when it was refunded or why it failed); `REPAYMENT_REFUND` in the books; and the sandbox
 * payment provider's own record of refunds, one per charge.
 */
export class Migration20261123020000_refunds extends Migration {
  override name = "Migration20261123020000_refunds";

  up(): void {
    this.addSql(`
      alter table installments
        add column collected_reference text,
        add column refund_status text
          constraint installments_refund_status_check check (refund_status in ('PENDING', 'REFUNDED', 'FAILED')),
        add column refund_reference text,
        add column refund_next_attempt_at timestamptz,
        add column refunded_at timestamptz,
        add column refund_failure text`);
    this.addSql("create unique index installments_collected_reference on installments (collected_reference)");
    this.addSql("create unique index installments_refund_reference on installments (refund_reference)");
    this.addSql(
      "create index installments_refunds_due on installments (refund_next_attempt_at) where refund_status = 'PENDING'",
    );
    // A debit keeps its reference until it is settled and the attempt count only grows with a new reference,
    // so the charge that collected an installment is its last attempt's.
    this.addSql(`
      update installments set collected_reference = id || ':' || attempts
       where status = 'COLLECTED' and attempts > 0`);
    this.addSql("alter table book_entries drop constraint book_entries_kind_check");
    this.addSql(`alter table book_entries add constraint book_entries_kind_check
      check (kind in ('PRINCIPAL_OUT', 'FEE', 'REPAYMENT_IN', 'PRINCIPAL_REVERSED', 'FEE_REVERSED',
                      'REPAYMENT_REFUND'))`);
    // The sandbox payment provider's record of refunds: one per charge, keyed by our refund reference.
    this.addSql(`
      create table sandbox_refunds (
        reference text primary key,
        charge_reference text not null constraint sandbox_refunds_charge_reference_key unique,
        amount_kobo bigint not null,
        status text not null check (status in ('SUCCESS', 'FAILED')),
        failure_reason text,
        created_at timestamptz not null
      )`);
  }
}
