import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import type { Environment } from "../platform/tenancy.ts";

/** A delivery claimed for one attempt, with what sending it needs. */
export interface ClaimedDelivery {
  id: string;
  event_id: string;
  webhook_id: string;
  /** The partner the delivery belongs to (its `partner_id`). */
  partner: string;
  environment: Environment;
  attempts: number;
  created_at: Date;
  /** The time the attempt is (or was) due. */
  next_attempt_at: Date;
  /** The claim's `locked_until`, exactly as stored: only the holder of this claim may park or release it. */
  lease_token: string;
  url: string;
  webhook_status: string;
  deleted_at: Date | null;
  secret_enc: Buffer;
  previous_secret_enc: Buffer | null;
  previous_secret_expires_at: Date | null;
  body: string;
  /** The subscription's circuit: consecutive failures, and when the next probe may go (null: closed). */
  failure_streak: number;
  circuit_probe_at: Date | null;
}

/** A subscription's circuit after an update. */
export interface CircuitState {
  id: string;
  failure_streak: number;
  /** Null while the circuit is closed. */
  circuit_probe_at: Date | null;
}

/** One attempt to record, and the delivery's state after it. */
export interface RecordedAttempt {
  d: ClaimedDelivery;
  r: {
    ok: boolean;
    statusCode?: number | undefined;
    error?: string | undefined;
    latencyMs: number;
    responseBody?: string | undefined;
    sentHeaders?: Record<string, string> | undefined;
  };
  startedAt: Date;
  attempts: number;
  next: Date | undefined;
  status: string;
}

/**
 * The delivery worker's statements on the webhooks feature's tables: claims, recorded attempts, parked
 * deliveries, circuits and the sweeper. They serve every tenant (the worker is not a partner's request) and run
 * raw: each takes a whole batch in one round trip, on the hot path of every delivery.
 */
export const deliveryWorkerRepository = {
  /**
   * Claims the due deliveries among `ids` that no other worker holds, with a lease, for one attempt each
   * (it earns raw SQL: one round trip for a whole batch, on the hot path of every delivery).
   */
  claimDeliveries(em: Em, ids: string[], now: Date, leaseMs: number): Promise<ClaimedDelivery[]> {
    return sql<ClaimedDelivery>(
      em,
      `with claimed as (
         update webhook_deliveries d
            set locked_until = $2::timestamptz + make_interval(secs => $3::double precision / 1000)
          where d.id = any($1::text[])
            and d.status in ('PENDING', 'FAILED')
            and d.next_attempt_at <= $2::timestamptz + interval '1 second'
            and (d.locked_until is null or d.locked_until < $2::timestamptz)
         returning d.id, d.event_id, d.webhook_id, d.partner_id as partner, d.environment, d.attempts, d.created_at,
                   d.next_attempt_at, d.locked_until as lease_token)
       select c.*, w.url, w.status as webhook_status, w.deleted_at, w.secret_enc, w.previous_secret_enc,
              w.previous_secret_expires_at, e.body, w.failure_streak, w.circuit_open_until as circuit_probe_at
         from claimed c join webhooks w on w.id = c.webhook_id join events e on e.id = c.event_id`,
      [ids, now, leaseMs],
      { prepare: true },
    );
  },

  /** Writes every attempt and the deliveries' new states, two statements for the whole batch. */
  async recordAttempts(tx: Em, rows: RecordedAttempt[], now: Date): Promise<void> {
    if (rows.length === 0) return;
    await sql(
      tx,
      `insert into webhook_attempts (delivery_id, webhook_id, attempt, started_at, succeeded, status_code, error, latency_ms,
                                     response_body, signature_headers)
       select a, w, n, s, ok, c, e, l, b, h::jsonb
         from unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[], $5::bool[], $6::int[], $7::text[], $8::int[],
                     $9::text[], $10::text[]) as u (a, w, n, s, ok, c, e, l, b, h)`,
      [
        rows.map((x) => x.d.id),
        rows.map((x) => x.d.webhook_id),
        rows.map((x) => x.attempts),
        rows.map((x) => x.startedAt),
        rows.map((x) => x.r.ok),
        rows.map((x) => x.r.statusCode ?? null),
        rows.map((x) => x.r.error ?? null),
        rows.map((x) => x.r.latencyMs),
        rows.map((x) => x.r.responseBody ?? null),
        rows.map((x) => (x.r.sentHeaders ? JSON.stringify(x.r.sentHeaders) : null)),
      ],
    );
    await sql(
      tx,
      `update webhook_deliveries d
          set status = u.status, attempts = u.attempts, last_status_code = u.code, last_error = u.error,
              last_response_body = u.body, last_latency_ms = u.latency, next_attempt_at = u.next,
              locked_until = null, first_attempt_at = coalesce(d.first_attempt_at, u.started),
              delivered_at = case when u.status = 'DELIVERED' then $10::timestamptz end,
              given_up_at = case when u.status = 'GIVEN_UP' then $10::timestamptz end
         from unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[], $6::text[], $7::int[],
                     $8::timestamptz[], $9::timestamptz[])
              as u (id, status, attempts, code, error, body, latency, next, started)
        where d.id = u.id and d.status in ('PENDING', 'FAILED')`,
      [
        rows.map((x) => x.d.id),
        rows.map((x) => x.status),
        rows.map((x) => x.attempts),
        rows.map((x) => x.r.statusCode ?? null),
        rows.map((x) => x.r.error ?? null),
        rows.map((x) => x.r.responseBody ?? null),
        rows.map((x) => x.r.latencyMs),
        rows.map((x) => x.next ?? null),
        rows.map((x) => x.startedAt),
        now,
      ],
    );
  },

  /**
   * Moves claimed deliveries that cannot be attempted now (their subscription's circuit is open, or its
   * capacity is taken) to a later time and lets go of them; only deliveries still under the caller's claim
   * move. Returns the ones moved, for their wake-ups.
   */
  async parkDeliveries(
    tx: Em,
    rows: { id: string; at: Date; token: string }[],
  ): Promise<{ id: string; environment: Environment }[]> {
    if (rows.length === 0) return [];
    return sql(
      tx,
      `update webhook_deliveries d set next_attempt_at = u.at, locked_until = null
         from unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) as u (id, at, token)
        where d.id = u.id and d.status in ('PENDING', 'FAILED') and d.locked_until = u.token
        returning d.id, d.environment`,
      [rows.map((r) => r.id), rows.map((r) => r.at), rows.map((r) => r.token)],
    );
  },

  /**
   * Brings subscriptions' circuits up to date after attempts: `reset` when one of them succeeded (the streak
   * restarts from the failures after it), else the failures add to the streak. At `threshold` the circuit opens
   * (or stays open) until now plus the time it has been open, at least `minWaitMs` and at most `maxWaitMs`, so
   * the wait between probes doubles. Rows with nothing to change are not written.
   */
  updateCircuits(
    tx: Em,
    rows: { webhookId: string; reset: boolean; failures: number }[],
    now: Date,
    policy: { threshold: number; minWaitMs: number; maxWaitMs: number },
  ): Promise<CircuitState[]> {
    if (rows.length === 0) return Promise.resolve([]);
    const streak = "(case when u.reset then u.failures else w.failure_streak + u.failures end)";
    return sql<CircuitState>(
      tx,
      `update webhooks w
          set failure_streak = ${streak},
              circuit_opened_at = case when ${streak} >= $4 then coalesce(w.circuit_opened_at, $5::timestamptz) end,
              circuit_open_until = case when ${streak} >= $4 then
                $5::timestamptz + make_interval(secs => least($7::double precision, greatest($6::double precision,
                  extract(epoch from $5::timestamptz - coalesce(w.circuit_opened_at, $5::timestamptz)) * 1000)) / 1000)
              end
         from unnest($1::text[], $2::bool[], $3::int[]) as u (id, reset, failures)
        where w.id = u.id and (u.failures > 0 or w.failure_streak > 0 or w.circuit_open_until is not null)
        returning w.id, w.failure_streak, w.circuit_open_until as circuit_probe_at`,
      [
        rows.map((r) => r.webhookId),
        rows.map((r) => r.reset),
        rows.map((r) => r.failures),
        policy.threshold,
        now,
        policy.minWaitMs,
        policy.maxWaitMs,
      ],
    );
  },

  /**
   * Takes the probe of an open circuit whose wait is over: the circuit stays open until `until` (the probe's
   * attempt ends before it), so only one probe goes at a time across every instance. `won` false: another
   * instance has the probe, or the circuit is not (or no longer) waiting; `probe_at` says which (null: closed).
   */
  async claimProbe(
    em: Em,
    webhookId: string,
    now: Date,
    until: Date,
  ): Promise<{ won: boolean; probe_at: Date | null }> {
    const [row] = await sql<{ won: boolean; probe_at: Date | null }>(
      em,
      `with taken as (
         update webhooks set circuit_open_until = $3
          where id = $1 and circuit_open_until is not null and circuit_open_until <= $2
          returning circuit_open_until)
       select exists (select 1 from taken) as won,
              coalesce((select circuit_open_until from taken),
                       (select circuit_open_until from webhooks where id = $1)) as probe_at`,
      [webhookId, now, until],
    );
    return row ?? { won: false, probe_at: null };
  },

  /** Disables subscriptions (their endpoint answered 410 Gone). */
  async disableWebhooks(tx: Em, ids: string[], reason: string, now: Date): Promise<void> {
    if (ids.length === 0) return;
    await sql(
      tx,
      `update webhooks set status = 'DISABLED', disabled_reason = $3, updated_at = $2
        where id = any($1::text[]) and deleted_at is null`,
      [ids, now, reason],
    );
  },

  /** The delivery sweeper's lock: false when another instance's sweeper holds it. */
  async tryLockSweeper(tx: Em): Promise<boolean> {
    const [lock] = await sql<{ ok: boolean }>(tx, "select pg_try_advisory_xact_lock(7104223321) as ok");
    return lock?.ok === true;
  },

  /** Deliveries overdue by more than `graceMs` that no worker holds (their wake-up was lost). */
  overdueDeliveries(
    tx: Em,
    now: Date,
    graceMs: number,
    limit: number,
  ): Promise<{ id: string; environment: Environment }[]> {
    return sql<{ id: string; environment: Environment }>(
      tx,
      `select id, environment from webhook_deliveries
        where status in ('PENDING', 'FAILED')
          and next_attempt_at <= $1::timestamptz - make_interval(secs => $2::double precision / 1000)
          and (locked_until is null or locked_until < $1::timestamptz)
        order by next_attempt_at
        limit $3`,
      [now, graceMs, limit],
    );
  },
};
