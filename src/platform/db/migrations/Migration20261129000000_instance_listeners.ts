import { Migration } from "@mikro-orm/migrations";

/** The ports each running instance listens on (platform/http/listener-registry.ts). */
export class Migration20261129000000_instance_listeners extends Migration {
  override name = "Migration20261129000000_instance_listeners";

  up(): void {
    this.addSql(
      `create table if not exists instance_listeners (
        instance_id text not null,
        port integer not null,
        seen_at timestamptz not null,
        primary key (instance_id, port)
      )`,
    );
  }
}
