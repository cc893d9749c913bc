import { Migration } from "@mikro-orm/migrations";

/** Disbursements, their installments, the partner's books, and the sandbox payment provider's ledger. */
export class Migration20261122040000_disbursements extends Migration {
  override name = "Migration20261122040000_disbursements";

  up(): void {
    this.addSql(`
      create table disbursements (
        id text primary key,
        partner_id text not null references partners (id),
        environment text not null check (environment in ('sandbox', 'production')),
        user_id text not null references users (id),
        status text not null check (status in ('PENDING', 'PROCESSING', 'DELIVERED', 'FAILED', 'REVERSED')),
        principal_kobo bigint not null check (principal_kobo > 0),
        fee_kobo bigint not null check (fee_kobo >= 0),
        fee_rate_bps integer not null check (fee_rate_bps between 0 and 10000),
        destination text not null check (destination in ('WALLET', 'BANK')),
        reference text not null,
        schedule_accepted_at timestamptz not null,
        failure_reason text,
        provider text not null,
        created_at timestamptz not null,
        processing_at timestamptz,
        delivered_at timestamptz,
        failed_at timestamptz
      )`);
    // A partner's reference names one disbursement per environment.
    this.addSql(
      "create unique index disbursements_reference on disbursements (partner_id, environment, reference)",
    );
    this.addSql("create index disbursements_by_user on disbursements (user_id)");
    this.addSql(`
      create table installments (
        id text primary key,
        disbursement_id text not null references disbursements (id),
        seq integer not null,
        due_date date not null,
        amount_kobo bigint not null check (amount_kobo > 0),
        status text not null check (status in ('SCHEDULED', 'COLLECTED', 'FAILED', 'CANCELLED')),
        attempts integer not null default 0,
        next_attempt_at timestamptz,
        last_failure text,
        collected_at timestamptz,
        failed_at timestamptz,
        unique (disbursement_id, seq)
      )`);
    this.addSql("create index installments_due on installments (next_attempt_at) where status = 'SCHEDULED'");
    // The partner's books: signed amounts in kobo (out negative), one row per movement.
    this.addSql(`
      create table book_entries (
        id bigint generated always as identity primary key,
        partner_id text not null references partners (id),
        environment text not null check (environment in ('sandbox', 'production')),
        disbursement_id text not null references disbursements (id),
        installment_id text references installments (id),
        kind text not null check (kind in ('PRINCIPAL_OUT', 'FEE', 'REPAYMENT_IN')),
        amount_kobo bigint not null,
        booked_at timestamptz not null
      )`);
    // Each movement is booked once, whatever retries happen.
    this.addSql(
      "create unique index book_entries_once on book_entries (disbursement_id, kind, coalesce(installment_id, ''))",
    );
    this.addSql("create index book_entries_by_owner on book_entries (partner_id, environment, booked_at)");
    // The sandbox payment provider's own record of transfers, keyed by our reference: asking it twice for
    // the same reference returns the first transfer, as a real provider's idempotent reference does.
    this.addSql(`
      create table sandbox_debits (
        reference text primary key,
        amount_kobo bigint not null,
        status text not null check (status in ('SUCCESS', 'FAILED')),
        failure_reason text,
        created_at timestamptz not null
      )`);
    this.addSql(`
      create table sandbox_transfers (
        reference text primary key,
        amount_kobo bigint not null,
        status text not null check (status in ('SUCCESS', 'FAILED')),
        failure_reason text,
        created_at timestamptz not null
      )`);
  }
}
