import { Migration } from "@mikro-orm/migrations";

/**
 * The partner portal's people (CONTRACT.md §12, docs/portal.md): members, invites, sessions, the audit log
 * and the per-account sign-in throttle.
 */
export class Migration20261126000000_portal extends Migration {
  override name = "Migration20261126000000_portal";

  up(): void {
    this.addSql(`
      create table portal_members (
        id text primary key,
        partner_id text not null references partners (id),
        email text not null,
        role text not null check (role in ('admin', 'developer', 'viewer')),
        password_hash text not null,
        totp_enc bytea not null,
        totp_last_step integer not null,
        recovery_hashes bytea not null,
        created_at timestamptz not null,
        removed_at timestamptz
      )`);
    this.addSql(
      "create unique index portal_members_one_active_email on portal_members (email) where removed_at is null",
    );
    this.addSql("create index portal_members_by_partner on portal_members (partner_id, created_at)");
    this.addSql(`
      create table portal_invites (
        id text primary key,
        partner_id text not null references partners (id),
        email text not null,
        role text not null check (role in ('admin', 'developer', 'viewer')),
        token_hash bytea not null constraint portal_invites_token_hash_key unique,
        invited_by text not null,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        used_at timestamptz,
        password_hash text,
        totp_enc bytea
      )`);
    this.addSql("create index portal_invites_by_expiry on portal_invites (expires_at)");
    this.addSql(`
      create table portal_sessions (
        id text primary key,
        token_hash bytea not null constraint portal_sessions_token_hash_key unique,
        member_id text not null references portal_members (id),
        partner_id text not null references partners (id),
        created_at timestamptz not null,
        last_seen_at timestamptz not null,
        expires_at timestamptz not null,
        ended_at timestamptz
      )`);
    this.addSql("create index portal_sessions_by_member on portal_sessions (member_id)");
    this.addSql("create index portal_sessions_by_expiry on portal_sessions (expires_at)");
    this.addSql(`
      create table portal_audit_events (
        id text primary key,
        partner_id text not null references partners (id),
        actor text not null,
        actor_email text not null,
        action text not null,
        target text not null,
        outcome text not null,
        environment text not null,
        detail text not null,
        evidence_enc bytea not null,
        created_at timestamptz not null
      )`);
    this.addSql("create index portal_audit_events_by_partner on portal_audit_events (partner_id, id)");
    this.addSql("create index portal_audit_events_by_age on portal_audit_events (created_at)");
    this.addSql(`
      create table portal_signin_throttles (
        email_hash bytea primary key,
        failures integer not null,
        locked_until timestamptz,
        updated_at timestamptz not null
      )`);
    this.addSql("create index portal_signin_throttles_by_age on portal_signin_throttles (updated_at)");
  }
}
