import { Migration } from "@mikro-orm/migrations";

/**
 * The HTTP payment provider: the platform's payment instruments per user (sealed), debit attempts that are
 * in flight at the provider, and reversed payouts with their entries in the books.
 */
export class Migration20261122050000_payment_providers extends Migration {
  override name = "Migration20261122050000_payment_providers";

  up(): void {
    // Provider codes for the user's bank account, wallet and direct-debit authorisation, as the platform
    // holds them. Sealed under the master key; the flags say what is on file without opening the box.
    this.addSql(`
      create table payment_instruments (
        user_id text primary key references users (id),
        sealed bytea not null,
        has_bank boolean not null,
        has_wallet boolean not null,
        has_debit boolean not null,
        updated_at timestamptz not null
      )`);
    // The provider reference of a debit sent and not yet settled. While it is set, every retry (after a
    // crash, a time-out or a pending answer) asks the provider about this reference instead of charging anew.
    this.addSql("alter table installments add column pending_reference text");
    this.addSql("create unique index installments_pending_reference on installments (pending_reference)");
    this.addSql("alter table disbursements add column reversed_at timestamptz");
    this.addSql("alter table book_entries drop constraint book_entries_kind_check");
    this.addSql(`alter table book_entries add constraint book_entries_kind_check
      check (kind in ('PRINCIPAL_OUT', 'FEE', 'REPAYMENT_IN', 'PRINCIPAL_REVERSED', 'FEE_REVERSED'))`);
  }
}
