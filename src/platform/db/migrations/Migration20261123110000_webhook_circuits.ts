import { Migration } from "@mikro-orm/migrations";

/**
 * A circuit per webhook subscription (docs/webhooks.md "Fairness and back-off"): the run of consecutive failed
 * attempts, when the circuit opened, and until when deliveries to it wait (then one probe goes at a time).
 */
export class Migration20261123110000_webhook_circuits extends Migration {
  override name = "Migration20261123110000_webhook_circuits";

  up(): void {
    this.addSql("alter table webhooks add column failure_streak integer not null default 0");
    this.addSql("alter table webhooks add column circuit_opened_at timestamptz");
    this.addSql("alter table webhooks add column circuit_open_until timestamptz");
  }
}
