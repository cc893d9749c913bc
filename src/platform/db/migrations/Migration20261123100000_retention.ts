import { Migration } from "@mikro-orm/migrations";

/**
 * Indexes for the retention purge (docs/operations.md "Retention"): each purge finds what is past its
 * retention through an index, in small batches, and every row it deletes has an index behind each foreign key
 * that points at it, so PostgreSQL's own reference checks never scan a whole table per deleted row.
 *
 * `if not exists`: on a large database an operator may build these beforehand with `create index
 * concurrently` under the same names (this migration runs in one transaction, where `concurrently` cannot).
 */
export class Migration20261123100000_retention extends Migration {
  override name = "Migration20261123100000_retention";

  up(): void {
    // Events past retention, oldest first.
    this.addSql("create index if not exists events_by_age on events (created_at)");
    // Replays of a delivery: the purge deletes them before the delivery they replay, and the reference check
    // of `replay_of` on every deleted delivery is an index probe instead of a scan of all deliveries.
    this.addSql(
      "create index if not exists deliveries_by_replay_of on webhook_deliveries (replay_of) where replay_of is not null",
    );
    // Deleted subscriptions past retention.
    this.addSql(
      "create index if not exists webhooks_deleted on webhooks (deleted_at) where deleted_at is not null",
    );
    // Consent links by the moment they ended: decided, or else expired.
    this.addSql(
      "create index if not exists consent_links_by_end on consent_links ((coalesce(decided_at, expires_at)))",
    );
    // Sandbox disbursements past retention (production ones are never purged).
    this.addSql(
      "create index if not exists disbursements_sandbox_by_age on disbursements (created_at) where environment = 'sandbox'",
    );
    // The sandbox payment simulator's records by age (those left without their loan are purged).
    for (const table of ["sandbox_transfers", "sandbox_debits", "sandbox_refunds"]) {
      this.addSql(`create index if not exists ${table}_by_age on ${table} (created_at)`);
    }
    // The reference check of `book_entries.installment_id` when a sandbox installment is deleted.
    this.addSql(
      "create index if not exists book_entries_by_installment on book_entries (installment_id) where installment_id is not null",
    );
  }
}
