import { Migration } from "@mikro-orm/migrations";

/**
 * What an event is about, for ListEvents' `user_id` and `object_id` filters (proto/partner/v1/webhooks.proto):
 * the user, and the disbursement or consent it reports, as the outbox is told when the event is raised. Both
 * columns are nullable and added without a default, so no partition is rewritten; events raised before keep
 * NULL and are not found by the filters (their subject is only in their JSON body, which is not searched).
 *
 * Each filter is a range of a partial index in the list's own order, `(partner_id, environment, <subject>,
 * created_at, id)`, holding only the rows that name a subject: test sends and older events add nothing to it.
 * `events` is partitioned by month: an index made on the parent is made on every partition, and on each one
 * attached later (platform/db/partitions.ts), under its own name.
 *
 * `if not exists` throughout: this migration runs in one transaction, where `concurrently` cannot, and building
 * an index holds writes to each partition for its duration. On a large database an operator may add the columns
 * and build the indexes beforehand under the same names (docs/operations.md): `create index … on only events …`
 * (invalid until complete), then `create index concurrently` on each partition and `alter index … attach
 * partition` for each.
 */
export class Migration20261205000000_event_subjects extends Migration {
  override name = "Migration20261205000000_event_subjects";

  up(): void {
    this.addSql("alter table events add column if not exists user_id text null");
    this.addSql("alter table events add column if not exists object_id text null");
    this.addSql(
      "create index if not exists events_by_user on events (partner_id, environment, user_id, created_at, id) where user_id is not null",
    );
    this.addSql(
      "create index if not exists events_by_object on events (partner_id, environment, object_id, created_at, id) where object_id is not null",
    );
  }
}
