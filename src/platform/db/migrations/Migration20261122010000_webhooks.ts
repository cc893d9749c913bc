import { Migration } from "@mikro-orm/migrations";

/** Webhook subscriptions, events (the outbox), deliveries and their attempts; idempotency records. */
export class Migration20261122010000_webhooks extends Migration {
  override name = "Migration20261122010000_webhooks";

  up(): void {
    this.addSql(`
      create table webhooks (
        id text primary key,
        partner_id text not null references partners (id),
        environment text not null check (environment in ('sandbox', 'production')),
        url text not null,
        description text not null default '',
        events text[] not null check (cardinality(events) > 0),
        status text not null check (status in ('ACTIVE', 'DISABLED')),
        disabled_reason text,
        secret_enc bytea not null,
        previous_secret_enc bytea,
        previous_secret_expires_at timestamptz,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        deleted_at timestamptz
      )`);
    this.addSql(
      "create index webhooks_by_owner on webhooks (partner_id, environment, created_at) where deleted_at is null",
    );
    // The outbox: the exact body POSTed is stored once, at the moment the event is raised.
    this.addSql(`
      create table events (
        id text primary key,
        partner_id text not null references partners (id),
        environment text not null check (environment in ('sandbox', 'production')),
        type text not null,
        body text not null,
        test boolean not null default false,
        created_at timestamptz not null
      )`);
    this.addSql("create index events_by_owner on events (partner_id, environment, created_at)");
    // The delivery row is the truth about a delivery; a queued job is only a wake-up.
    this.addSql(`
      create table webhook_deliveries (
        id text primary key,
        event_id text not null references events (id),
        webhook_id text not null references webhooks (id),
        partner_id text not null references partners (id),
        environment text not null check (environment in ('sandbox', 'production')),
        status text not null check (status in ('PENDING', 'FAILED', 'DELIVERED', 'GIVEN_UP')),
        attempts integer not null default 0,
        last_status_code integer,
        last_error text,
        last_response_body text,
        last_latency_ms integer,
        next_attempt_at timestamptz,
        locked_until timestamptz,
        first_attempt_at timestamptz,
        delivered_at timestamptz,
        given_up_at timestamptz,
        created_at timestamptz not null,
        replay_of text references webhook_deliveries (id),
        check ((status in ('PENDING', 'FAILED')) = (next_attempt_at is not null))
      )`);
    this.addSql("create index deliveries_by_webhook on webhook_deliveries (webhook_id, id desc)");
    this.addSql("create index deliveries_by_event on webhook_deliveries (event_id)");
    this.addSql(
      "create index deliveries_due on webhook_deliveries (next_attempt_at) where status in ('PENDING', 'FAILED')",
    );
    this.addSql(`
      create table webhook_attempts (
        id bigint generated always as identity primary key,
        delivery_id text not null references webhook_deliveries (id),
        webhook_id text not null references webhooks (id),
        attempt integer not null,
        started_at timestamptz not null,
        succeeded boolean not null,
        status_code integer,
        error text,
        latency_ms integer not null,
        response_body text
      )`);
    this.addSql("create index attempts_by_delivery on webhook_attempts (delivery_id, attempt)");
    this.addSql("create index attempts_by_webhook_time on webhook_attempts (webhook_id, started_at)");
    // CONTRACT.md §8: a key is scoped to the partner and environment and kept 7 days.
    this.addSql(`
      create table idempotency_keys (
        partner_id text not null references partners (id),
        environment text not null check (environment in ('sandbox', 'production')),
        key text not null,
        method text not null,
        request_hash bytea not null,
        response bytea not null,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        primary key (partner_id, environment, key)
      )`);
    this.addSql("create index idempotency_keys_expiry on idempotency_keys (expires_at)");
  }
}
