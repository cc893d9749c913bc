import { Migration } from "@mikro-orm/migrations";

/**
 * A snapshot counts a user's distinct counterparties in its window and the caller's ledger scopes. Since the
 * scope column came in, the index on (user, direction, last day) no longer held everything the count reads,
 * so every counterparty in the window cost a visit to the table: thousands of random page reads for a user
 * with thousands of counterparties. With the scope included the count is an index-only scan again.
 */
export class Migration20261128010000_counterparty_window extends Migration {
  override name = "Migration20261128010000_counterparty_window";

  up(): void {
    this.addSql(
      "create index ledger_counterparties_window on ledger_counterparties (user_id, direction, last_day) include (scope)",
    );
    this.addSql("drop index ledger_counterparties_recent");
  }
}
