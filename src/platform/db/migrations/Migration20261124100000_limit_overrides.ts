import { Migration } from "@mikro-orm/migrations";

/**
 * Dedicated capacity (CONTRACT.md §8, docs/rate-limits.md): the operator's overrides of the rate limits and the
 * limits on expensive work, per partner and environment (`key_id` '') and per API key (`key_id` the key's id).
 * A null column follows the level above: the partner's row, then the service's defaults. A bucket is set whole
 * (capacity and refill together), a key overrides only its buckets, and the caps are the service's own, so a
 * row the service could not have written is refused here too.
 */
export class Migration20261124100000_limit_overrides extends Migration {
  override name = "Migration20261124100000_limit_overrides";

  up(): void {
    this.addSql(`
      create table limit_overrides (
        partner_id text not null references partners (id),
        environment text not null check (environment in ('sandbox', 'production')),
        key_id text not null default '',
        read_capacity integer,
        read_refill_per_second numeric(7, 2),
        write_capacity integer,
        write_refill_per_second numeric(7, 2),
        snapshot_concurrency integer,
        disbursements_per_user_per_day integer,
        updated_at timestamptz not null,
        primary key (partner_id, environment, key_id),
        constraint limit_overrides_read_check check ((read_capacity is null) = (read_refill_per_second is null)
          and (read_capacity is null or (read_capacity between 1 and 100000
            and read_refill_per_second between 0.01 and 10000))),
        constraint limit_overrides_write_check check ((write_capacity is null) = (write_refill_per_second is null)
          and (write_capacity is null or (write_capacity between 1 and 100000
            and write_refill_per_second between 0.01 and 10000))),
        constraint limit_overrides_snapshot_concurrency_check check (snapshot_concurrency between 1 and 1000),
        constraint limit_overrides_disbursements_per_user_per_day_check
          check (disbursements_per_user_per_day between 1 and 10000),
        constraint limit_overrides_key_check check (key_id = '' or (snapshot_concurrency is null
          and disbursements_per_user_per_day is null))
      )`);
  }
}
