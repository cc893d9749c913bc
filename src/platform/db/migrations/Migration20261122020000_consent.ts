import { Migration } from "@mikro-orm/migrations";

/** Users fed by the platform, consents, and consent links. */
export class Migration20261122020000_consent extends Migration {
  override name = "Migration20261122020000_consent";

  up(): void {
    // Phone numbers: sealed for display of the last four digits only, and a keyed hash to match links.
    this.addSql(`
      create table users (
        id text primary key,
        environment text not null check (environment in ('sandbox', 'production')),
        phone_hash bytea not null,
        phone_enc bytea not null,
        phone_last4 text not null,
        segment text not null check (segment in ('trader', 'salaried', 'gig', 'other')),
        created_at timestamptz not null,
        updated_at timestamptz not null
      )`);
    this.addSql("create unique index users_by_phone on users (environment, phone_hash)");
    this.addSql(`
      create table consents (
        id text primary key,
        partner_id text not null references partners (id),
        environment text not null check (environment in ('sandbox', 'production')),
        user_id text not null references users (id),
        status text not null check (status in ('ACTIVE', 'REVOKED', 'EXPIRED')),
        scopes text[] not null check (cardinality(scopes) > 0),
        ledger_window_days integer not null check (ledger_window_days between 1 and 365),
        max_ledger_window_days integer not null check (max_ledger_window_days between ledger_window_days and 365),
        source text not null check (source in ('DASHBOARD', 'CONSENT_LINK')),
        granted_at timestamptz not null,
        expires_at timestamptz not null,
        revoked_at timestamptz,
        revoked_by text check (revoked_by in ('USER', 'PARTNER', 'SYSTEM')),
        superseded_by text references consents (id)
      )`);
    // One ACTIVE consent per person, partner and environment: a new grant supersedes the old one.
    this.addSql(
      `create unique index consents_one_active on consents (partner_id, environment, user_id) where status = 'ACTIVE'`,
    );
    this.addSql("create index consents_by_user on consents (user_id, granted_at desc)");
    this.addSql(
      "create index consents_by_owner on consents (partner_id, environment, user_id, granted_at desc)",
    );
    this.addSql("create index consents_expiring on consents (expires_at) where status = 'ACTIVE'");
    this.addSql(`
      create table consent_links (
        id text primary key,
        partner_id text not null references partners (id),
        environment text not null check (environment in ('sandbox', 'production')),
        token_hash bytea not null unique,
        token_enc bytea not null,
        phone_hash bytea not null,
        phone_last4 text not null,
        scopes text[] not null,
        ledger_window_days integer not null,
        max_ledger_window_days integer not null,
        redirect_url text,
        status text not null check (status in ('PENDING', 'ACCEPTED', 'DECLINED')),
        consent_id text references consents (id),
        expires_at timestamptz not null,
        decided_at timestamptz,
        created_at timestamptz not null
      )`);
    this.addSql("create index consent_links_by_owner on consent_links (partner_id, environment, created_at)");
  }
}
