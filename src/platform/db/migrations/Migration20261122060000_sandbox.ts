import { Migration } from "@mikro-orm/migrations";

/** Sandbox helpers and fixtures: transfers the simulator holds pending or reverses, and the fixtures' upkeep. */
export class Migration20261122060000_sandbox extends Migration {
  override name = "Migration20261122060000_sandbox";

  up(): void {
    this.addSql("alter table sandbox_transfers drop constraint sandbox_transfers_status_check");
    this.addSql(`alter table sandbox_transfers add constraint sandbox_transfers_status_check
      check (status in ('SUCCESS', 'FAILED', 'PENDING', 'REVERSED'))`);
    // How far the fixture users' generated ledger reaches; topped up day by day.
    this.addSql(`
      create table sandbox_fixtures (
        name text primary key,
        version integer not null,
        seeded_through date not null
      )`);
  }
}
