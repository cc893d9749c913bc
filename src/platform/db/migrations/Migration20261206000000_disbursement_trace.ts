import { Migration } from "@mikro-orm/migrations";

/**
 * The W3C `traceparent` of the partner's call that created a disbursement (docs/operations.md "Traces"), so
 * that its acceptance, payout, debits and the events they raise continue that call's trace. Null when tracing
 * was off; nullable without a default, so the table is not rewritten.
 */
export class Migration20261206000000_disbursement_trace extends Migration {
  override name = "Migration20261206000000_disbursement_trace";

  up(): void {
    this.addSql("alter table disbursements add column if not exists trace_parent text null");
  }
}
