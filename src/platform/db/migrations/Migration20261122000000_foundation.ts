import { Migration } from "@mikro-orm/migrations";

/** Partners, API keys, signing keys and the shared rate-limit buckets. */
export class Migration20261122000000_foundation extends Migration {
  override name = "Migration20261122000000_foundation";

  up(): void {
    this.addSql(`
      create table partners (
        id text primary key,
        name text not null check (char_length(name) between 1 and 200),
        fee_rate_bps integer not null check (fee_rate_bps between 0 and 10000),
        created_at timestamptz not null
      )`);
    this.addSql(`
      create table api_keys (
        id text primary key,
        partner_id text not null references partners (id),
        environment text not null check (environment in ('sandbox', 'production')),
        key_hash bytea not null unique check (octet_length(key_hash) = 32),
        prefix text not null,
        created_at timestamptz not null,
        expires_at timestamptz,
        revoked_at timestamptz,
        rolled_to text references api_keys (id)
      )`);
    // CONTRACT.md §2: at most one active key per partner and environment (plus rolled keys until they expire).
    this.addSql(`
      create unique index api_keys_one_active on api_keys (partner_id, environment)
        where expires_at is null and revoked_at is null`);
    this.addSql("create index api_keys_by_partner on api_keys (partner_id, created_at desc)");
    this.addSql(`
      create table signing_keys (
        kid text primary key,
        environment text not null check (environment in ('sandbox', 'production')),
        public_key bytea not null check (octet_length(public_key) = 32),
        private_key_enc bytea not null,
        not_before timestamptz not null,
        retires_at timestamptz not null,
        not_after timestamptz not null,
        created_at timestamptz not null,
        check (not_before < retires_at and retires_at <= not_after)
      )`);
    // Two instances scheduling the same quarter's key race on this index; one wins, the other re-reads.
    this.addSql("create unique index signing_keys_one_per_start on signing_keys (environment, not_before)");
    this.addSql(`
      create table rate_limit_buckets (
        bucket_key text primary key,
        tokens double precision not null,
        refilled_at timestamptz not null
      )`);
    // Takes up to p_want tokens from a shared token bucket in one round trip, refilling it first from the
    // database clock, so every instance sees one bucket whatever their own clocks say.
    this.addSql(`
      create function rate_limit_take(p_key text, p_capacity double precision, p_rate double precision, p_want integer)
      returns table (granted integer, remaining double precision)
      language plpgsql as $$
      declare
        v_now timestamptz := clock_timestamp();
        v_tokens double precision;
      begin
        insert into rate_limit_buckets as b (bucket_key, tokens, refilled_at)
          values (p_key, p_capacity, v_now)
        on conflict (bucket_key) do update
          set tokens = least(p_capacity,
                             b.tokens + greatest(0, extract(epoch from (v_now - b.refilled_at))) * p_rate),
              refilled_at = v_now
        returning b.tokens into v_tokens;
        granted := greatest(0, least(p_want, floor(v_tokens)))::integer;
        remaining := v_tokens - granted;
        if granted > 0 then
          update rate_limit_buckets set tokens = remaining where bucket_key = p_key;
        end if;
        return next;
      end $$`);
  }
}
