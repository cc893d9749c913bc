import { Migration } from "@mikro-orm/migrations";

/**
 * What the portal shows of webhooks (docs/webhooks.md "Deliveries, attempts and stats"): each attempt keeps the
 * signature headers it sent (never the secret: a signature once sent is no secret), and a subscription's
 * deliveries are found by status without reading the others.
 */
export class Migration20261127100000_webhook_portal extends Migration {
  override name = "Migration20261127100000_webhook_portal";

  up(): void {
    this.addSql("alter table webhook_attempts add column signature_headers jsonb");
    this.addSql(
      "create index deliveries_by_webhook_status on webhook_deliveries (webhook_id, status, id desc)",
    );
  }
}
