import { Migration } from "@mikro-orm/migrations";

/**
 * The partner's lists (ListConsents, ListConsentLinks, ListDisbursements) walk one tenant's rows newest first
 * by id: an index on (partner_id, environment, id) for each, and one with the status before the id where a
 * status filter is a stored column, so a page reads about `limit` index entries whatever other tenants
 * store (GetBooksSeries reads `book_entries_by_owner`, which already serves a period).
 *
 * The planner must also know how many rows one tenant has: it assumes partner and environment independent,
 * so a small tenant of a partner with many rows in the other environment looked dense, and walking the primary
 * key backwards (reading every newer row of every tenant) looked as cheap as the tenant's own index. Statistics
 * on the pair (its most common values) give it the tenant's real share.
 */
export class Migration20261127200000_partner_lists extends Migration {
  override name = "Migration20261127200000_partner_lists";

  up(): void {
    this.addSql("create index if not exists consents_by_owner_id on consents (partner_id, environment, id)");
    this.addSql(
      "create index if not exists consents_by_owner_status on consents (partner_id, environment, status, id)",
    );
    this.addSql(
      "create index if not exists consent_links_by_owner_id on consent_links (partner_id, environment, id)",
    );
    this.addSql(
      "create index if not exists disbursements_by_owner_id on disbursements (partner_id, environment, id)",
    );
    this.addSql(
      "create index if not exists disbursements_by_owner_status on disbursements (partner_id, environment, status, id)",
    );
    for (const table of ["consents", "consent_links", "disbursements"])
      this.addSql(
        `create statistics if not exists ${table}_owner_stats (mcv) on partner_id, environment from ${table}`,
      );
  }
}
