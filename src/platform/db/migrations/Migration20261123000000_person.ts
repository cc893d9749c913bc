import { Migration } from "@mikro-orm/migrations";

/**
 * The person's own word (CONTRACT.md §4, §6): one-time codes and prompt sessions for the hosted pages, links
 * locked by wrong codes, partners' lending caps,
 * and the evidence kept on every consent (how and when the person was authenticated, where from, and a hash
 * of the exact terms shown).
 */
export class Migration20261123000000_person extends Migration {
  override name = "Migration20261123000000_person";

  up(): void {
    this.addSql(`
      create table person_codes (
        id text primary key,
        environment text not null check (environment in ('sandbox', 'production')),
        subject text not null,
        owner text not null,
        phone_hash bytea not null,
        code_hash bytea not null,
        attempts integer not null default 0,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        used_at timestamptz
      )`);
    this.addSql("create index person_codes_by_subject on person_codes (subject, created_at)");
    this.addSql("create index person_codes_by_phone on person_codes (phone_hash, owner, created_at)");
    this.addSql("create index person_codes_by_age on person_codes (created_at)");
    this.addSql(`
      create table prompt_sessions (
        id text primary key,
        environment text not null check (environment in ('sandbox', 'production')),
        token_hash bytea not null constraint prompt_sessions_token_hash_key unique,
        user_id text not null,
        subject text not null,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        opened_at timestamptz,
        used_at timestamptz
      )`);
    this.addSql("create index prompt_sessions_by_age on prompt_sessions (created_at)");
    this.addSql("alter table consent_links drop constraint consent_links_status_check");
    this.addSql(
      "alter table consent_links add constraint consent_links_status_check check (status in ('PENDING', 'ACCEPTED', 'DECLINED', 'LOCKED'))",
    );
    this.addSql(`
      alter table partners
        add column max_cost_bps integer not null default 5000
          constraint partners_max_cost_bps_check check (max_cost_bps >= 0 and max_cost_bps <= 100000),
        add column max_tenor_days integer not null default 365
          constraint partners_max_tenor_days_check check (max_tenor_days >= 1 and max_tenor_days <= 1825)`);
    this.addSql(`
      alter table consents
        add column auth_method text check (auth_method in ('OTP_SMS', 'PLATFORM_SESSION', 'DASHBOARD')),
        add column authenticated_at timestamptz,
        add column evidence_enc bytea,
        add column terms_hash bytea`);
  }
}
