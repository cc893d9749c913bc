import { Migration } from "@mikro-orm/migrations";

/**
 * The per-user daily disbursement limit (docs/rate-limits.md) counts, in every create's transaction, what one
 * partner created for one user in one environment since midnight in Lagos: an index on exactly that range, so
 * the count reads a handful of index entries however many disbursements the partner has.
 */
export class Migration20261123130000_disbursement_daily_limit extends Migration {
  override name = "Migration20261123130000_disbursement_daily_limit";

  up(): void {
    this.addSql(
      "create index if not exists disbursements_by_owner_user_day on disbursements (partner_id, environment, user_id, created_at)",
    );
  }
}
