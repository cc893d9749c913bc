import { Migration } from "@mikro-orm/migrations";
import { encodeTime } from "ulid";

/**
 * Events, webhook deliveries and their attempts become monthly range partitions (CONTRACT.md §11,
 * docs/operations.md "Partitions"), so that retention drops a month instead of deleting its rows. Events and
 * deliveries are partitioned by their own id (a ULID: its first ten characters are its creation time, so a
 * month is a range of ids and a lookup by id reads one partition); attempts by their delivery's id, so a
 * delivery and its attempts share a month and go together.
 *
 * No row moves. The existing table becomes the first partition, `<table>_before`, holding every id before the
 * start of next month: a CHECK constraint proves that first (its scan lets reads and writes go on), so that
 * ATTACH needs no scan of its own; the exclusive locks are held only for renames and catalogue changes. An empty
 * table (a new database) is dropped instead and this month gets a partition of its own. The partitions of the
 * months after are created ahead by the webhooks' housekeeping job (platform/db/partitions.ts); this migration
 * creates the first three.
 *
 * The foreign keys between the three tables go: a partition is dropped whole, which a key referencing it would
 * forbid. Retention removes a month of all three together, and a later delivery (a replay) of a removed month's
 * event with it; keys to partners and webhooks stay.
 */
export class Migration20261130000000_partitioned_history extends Migration {
  override name = "Migration20261130000000_partitioned_history";

  up(): void {
    const now = new Date();
    const month = (add: number) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + add, 1));
    const bound = (prefix: string, add: number) => `${prefix}_${encodeTime(month(add).getTime(), 10)}`;
    const suffix = (add: number) => {
      const m = month(add);
      return `${m.getUTCFullYear()}_${String(m.getUTCMonth() + 1).padStart(2, "0")}`;
    };

    this.addSql("alter table webhook_attempts drop constraint webhook_attempts_delivery_id_fkey");
    this.addSql("alter table webhook_deliveries drop constraint webhook_deliveries_event_id_fkey");
    this.addSql("alter table webhook_deliveries drop constraint webhook_deliveries_replay_of_fkey");

    const tables: {
      table: string;
      key: string;
      prefix: string;
      primaryKey: string;
      indexes: [string, string][];
      foreignKeys: string[];
    }[] = [
      {
        table: "events",
        key: "id",
        prefix: "evt",
        primaryKey: "id",
        indexes: [
          ["events_by_owner", "(partner_id, environment, created_at)"],
          ["events_by_age", "(created_at)"],
        ],
        foreignKeys: ["constraint events_partner_id_fkey foreign key (partner_id) references partners (id)"],
      },
      {
        table: "webhook_deliveries",
        key: "id",
        prefix: "dlv",
        primaryKey: "id",
        indexes: [
          ["deliveries_by_webhook", "(webhook_id, id desc)"],
          ["deliveries_by_webhook_status", "(webhook_id, status, id desc)"],
          ["deliveries_by_event", "(event_id)"],
          ["deliveries_due", "(next_attempt_at) where status in ('PENDING', 'FAILED')"],
          ["deliveries_by_replay_of", "(replay_of) where replay_of is not null"],
        ],
        foreignKeys: [
          "constraint webhook_deliveries_webhook_id_fkey foreign key (webhook_id) references webhooks (id)",
          "constraint webhook_deliveries_partner_id_fkey foreign key (partner_id) references partners (id)",
        ],
      },
      {
        table: "webhook_attempts",
        key: "delivery_id",
        prefix: "dlv",
        primaryKey: "delivery_id, id",
        indexes: [
          ["attempts_by_delivery", "(delivery_id, attempt)"],
          ["attempts_by_webhook_time", "(webhook_id, started_at)"],
        ],
        foreignKeys: [
          "constraint webhook_attempts_webhook_id_fkey foreign key (webhook_id) references webhooks (id)",
        ],
      },
    ];

    for (const t of tables) {
      const before = `${t.table}_before`;
      const upper = bound(t.prefix, 1);
      // 1. Every existing row is before next month: proved with writes going on (SHARE UPDATE EXCLUSIVE).
      this.addSql(
        `alter table ${t.table} add constraint ${before}_bound check (${t.key} < '${upper}') not valid`,
      );
      this.addSql(`alter table ${t.table} validate constraint ${before}_bound`);
      // 2. The old table steps aside, with its indexes, and the partitioned one takes its name.
      this.addSql(`alter table ${t.table} rename to ${before}`);
      this.addSql(`alter index ${t.table}_pkey rename to ${before}_pkey`);
      for (const [name] of t.indexes) this.addSql(`alter index ${name} rename to ${name}_before`);
      if (t.table === "webhook_attempts") {
        // The parent numbers attempts from where the old table stopped; its own identity goes (a partition
        // may not have one), and the key the parent needs, (delivery_id, id), is built on it to replace its own
        // (a partition has the parent's primary key or none).
        this.addSql(`alter table ${before} alter column id drop identity`);
        this.addSql(`create unique index ${before}_key on ${before} (delivery_id, id)`);
        this.addSql(`alter table ${before} drop constraint ${before}_pkey`);
      }
      this.addSql(
        `create table ${t.table} (like ${before} including defaults including constraints) partition by range (${t.key})`,
      );
      this.addSql(`alter table ${t.table} drop constraint ${before}_bound`);
      this.addSql(`alter table ${t.table} add constraint ${t.table}_pkey primary key (${t.primaryKey})`);
      for (const [name, definition] of t.indexes) {
        const [columns, where] = definition.split(" where ");
        this.addSql(`create index ${name} on ${t.table} ${columns}${where ? ` where ${where}` : ""}`);
      }
      for (const fk of t.foreignKeys) this.addSql(`alter table ${t.table} add ${fk}`);
      if (t.table === "webhook_attempts")
        this.addSql(`
          do $$ begin
            execute format('alter table webhook_attempts alter column id add generated always as identity (start with %s)',
                           (select coalesce(max(id), 0) + 1 from webhook_attempts_before));
          end $$`);
      // 3. The old rows, if any, are the first partition; an empty old table goes, and this month gets its own.
      this.addSql(`
        do $$ begin
          if exists (select 1 from ${before}) then
            alter table ${t.table} attach partition ${before} for values from (minvalue) to ('${upper}');
          else
            drop table ${before};
            create table ${t.table}_${suffix(0)} partition of ${t.table}
              for values from ('${bound(t.prefix, 0)}') to ('${upper}');
          end if;
        end $$`);
      for (const add of [1, 2])
        this.addSql(
          `create table ${t.table}_${suffix(add)} partition of ${t.table} for values from ('${bound(t.prefix, add)}') to ('${bound(t.prefix, add + 1)}')`,
        );
    }
  }
}
