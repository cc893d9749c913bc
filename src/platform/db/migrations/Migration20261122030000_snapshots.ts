import { Migration } from "@mikro-orm/migrations";

/** The ledger (raw entries and the daily roll-ups reads use), standing and KYC. */
export class Migration20261122030000_snapshots extends Migration {
  override name = "Migration20261122030000_snapshots";

  up(): void {
    // Raw entries are kept (idempotency by the platform's id, audits); snapshot reads never scan them.
    this.addSql(`
      create table ledger_entries (
        id text primary key,
        user_id text not null references users (id),
        amount_kobo bigint not null check (amount_kobo > 0),
        direction text not null check (direction in ('IN', 'OUT')),
        counterparty_hash bytea not null,
        channel text not null,
        occurred_at timestamptz not null,
        day date not null
      )`);
    this.addSql("create index ledger_entries_by_user_day on ledger_entries (user_id, day)");
    // One row per user and UTC day: window totals and counts are a range scan of at most 365 rows.
    this.addSql(`
      create table ledger_daily (
        user_id text not null references users (id),
        day date not null,
        inflow_kobo bigint not null default 0,
        inflow_count integer not null default 0,
        outflow_kobo bigint not null default 0,
        outflow_count integer not null default 0,
        primary key (user_id, day)
      )`);
    // One row per user, direction and counterparty with the last day they met: windows end on the day of
    // the snapshot, so the distinct counterparties of a window are those whose last day falls inside it.
    this.addSql(`
      create table ledger_counterparties (
        user_id text not null references users (id),
        direction text not null check (direction in ('IN', 'OUT')),
        counterparty_hash bytea not null,
        first_day date not null,
        last_day date not null,
        primary key (user_id, direction, counterparty_hash)
      )`);
    this.addSql(
      "create index ledger_counterparties_recent on ledger_counterparties (user_id, direction, last_day)",
    );
    this.addSql(`
      create table standings (
        user_id text primary key references users (id),
        tier text not null check (tier in ('Unrated', 'Emerging', 'Established', 'Trusted')),
        score integer not null check (score between 0 and 1000),
        score_version text not null,
        standing_signals jsonb not null,
        work_signals jsonb not null,
        as_of timestamptz not null,
        updated_at timestamptz not null
      )`);
    this.addSql(`
      create table kyc (
        user_id text primary key references users (id),
        level text not null check (level in ('NONE', 'BASIC', 'FULL')),
        bvn_verified boolean not null,
        nin_verified boolean not null,
        phone_verified boolean not null,
        address_verified boolean not null,
        liveness_checked boolean not null,
        verified_at timestamptz,
        updated_at timestamptz not null
      )`);
    this.addSql("create index consents_active_standing on consents (user_id) where status = 'ACTIVE'");
  }
}
