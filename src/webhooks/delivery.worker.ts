import type { Clock } from "../platform/clock.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import type { Logger } from "../platform/logger.ts";
import type { Outbox } from "./outbox.ts";
import { nextAttemptAt, parseRetryAfter } from "./schedule.ts";
import type { AttemptResult, Sender } from "./sender.ts";
import { signatureHeaders } from "./signature.ts";

/** Options for {@link createDeliveryWorker}. */
export interface DeliveryWorkerOptions {
  clock: Clock;
  box: SecretBox;
  sender: Sender;
  outbox: Outbox;
  logger: Logger;
  /** How long a claimed delivery is held by one worker; past it, another may take it over. */
  leaseMs: number;
  /** How overdue a delivery must be before the sweeper re-queues it. */
  sweepGraceMs: number;
  /** Called once per attempt with the event-to-attempt delay (first attempts only) and the outcome. */
  onAttempt?: (a: {
    firstAttempt: boolean;
    sinceCreatedMs: number;
    ok: boolean;
    latencyMs: number;
    outcome: "delivered" | "retrying" | "given_up";
  }) => void;
}

interface Claimed {
  id: string;
  event_id: string;
  webhook_id: string;
  attempts: number;
  created_at: Date;
  url: string;
  webhook_status: string;
  deleted_at: Date | null;
  secret_enc: Buffer;
  previous_secret_enc: Buffer | null;
  previous_secret_expires_at: Date | null;
  body: string;
}

interface Outcome {
  delivery: Claimed;
  result: AttemptResult;
  startedAt: Date;
}

/** A secret box AAD that binds a subscription's secret to it. */
export const secretAad = (webhookId: string) => `webhook-secret:${webhookId}`;

/** Sends due deliveries and records what happened; the delivery row is the truth, jobs only wake it. */
export type DeliveryWorker = ReturnType<typeof createDeliveryWorker>;

/** Creates the delivery worker. */
export function createDeliveryWorker(o: DeliveryWorkerOptions) {
  const { clock, box, sender, outbox, logger } = o;
  const secrets = new Map<string, { enc: Buffer; secret: string }>();
  const open = (webhookId: string, enc: Buffer): string => {
    const hit = secrets.get(`${webhookId}:${enc.toString("base64")}`);
    if (hit) return hit.secret;
    const secret = box.open(enc, secretAad(webhookId)).toString("utf8");
    if (secrets.size > 10_000) secrets.clear();
    secrets.set(`${webhookId}:${enc.toString("base64")}`, { enc, secret });
    return secret;
  };

  /** Takes the deliveries that are due and not held by another worker, for one attempt each. */
  const claim = async (em: Em, ids: string[], now: Date): Promise<Claimed[]> =>
    sql<Claimed>(
      em,
      `with claimed as (
         update webhook_deliveries d
            set locked_until = $2::timestamptz + make_interval(secs => $3::double precision / 1000)
          where d.id = any($1::text[])
            and d.status in ('PENDING', 'FAILED')
            and d.next_attempt_at <= $2::timestamptz + interval '1 second'
            and (d.locked_until is null or d.locked_until < $2::timestamptz)
         returning d.id, d.event_id, d.webhook_id, d.attempts, d.created_at)
       select c.*, w.url, w.status as webhook_status, w.deleted_at, w.secret_enc, w.previous_secret_enc,
              w.previous_secret_expires_at, e.body
         from claimed c join webhooks w on w.id = c.webhook_id join events e on e.id = c.event_id`,
      [ids, now, o.leaseMs],
      { prepare: true },
    );

  const attempt = async (d: Claimed, now: Date): Promise<Outcome> => {
    const list = [open(d.webhook_id, d.secret_enc)];
    if (d.previous_secret_enc && d.previous_secret_expires_at && d.previous_secret_expires_at > now) {
      list.push(open(d.webhook_id, d.previous_secret_enc));
    }
    const headers = signatureHeaders({
      eventId: d.event_id,
      deliveryId: d.id,
      body: d.body,
      secrets: list,
      timestamp: Math.floor(now.getTime() / 1000),
    });
    const startedAt = now;
    const result = await sender.post(d.url, d.body, headers);
    return { delivery: d, result, startedAt };
  };

  /** Writes every attempt and the deliveries' new states in one transaction, with the retry wake-ups. */
  const record = async (em: Em, outcomes: Outcome[], abandoned: Claimed[]) => {
    const now = clock.now();
    const rows = outcomes.map(({ delivery: d, result: r, startedAt }) => {
      const attempts = d.attempts + 1;
      const gone = r.statusCode === 410;
      const next =
        r.ok || gone
          ? undefined
          : nextAttemptAt({
              attempts,
              now,
              createdAt: d.created_at,
              retryAfterSeconds:
                r.statusCode === 429 || r.statusCode === 503 ? parseRetryAfter(r.retryAfter, now) : undefined,
            });
      const status = r.ok ? "DELIVERED" : next ? "FAILED" : "GIVEN_UP";
      return { d, r, startedAt, attempts, gone, next, status };
    });
    await em.transactional(async (tx) => {
      if (rows.length > 0) {
        await sql(
          tx,
          `insert into webhook_attempts (delivery_id, webhook_id, attempt, started_at, succeeded, status_code, error, latency_ms, response_body)
           select * from unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[], $5::bool[], $6::int[], $7::text[], $8::int[], $9::text[])`,
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
          ],
        );
        // Only a delivery still waiting is updated: one deleted (given up) meanwhile stays given up.
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
      }
      // 410 Gone: the subscription is disabled and nothing more is sent to it.
      const gone = [...new Set(rows.filter((x) => x.gone).map((x) => x.d.webhook_id))];
      if (gone.length > 0) {
        await sql(
          tx,
          `update webhooks set status = 'DISABLED', disabled_reason = 'the endpoint answered 410 Gone', updated_at = $2
            where id = any($1::text[]) and deleted_at is null`,
          [gone, now],
        );
      }
      const stopped = [...gone, ...abandoned.map((d) => d.webhook_id)];
      if (stopped.length > 0) {
        await sql(
          tx,
          `update webhook_deliveries
              set status = 'GIVEN_UP', given_up_at = $2, next_attempt_at = null, locked_until = null
            where webhook_id = any($1::text[]) and status in ('PENDING', 'FAILED')`,
          [stopped, now],
        );
      }
      await outbox.enqueue(
        tx,
        rows
          .filter((x) => x.next)
          .map((x) => ({
            id: x.d.id,
            // Wake-ups run on the database clock: schedule the same delay from it.
            startAfter: new Date(Date.now() + ((x.next as Date).getTime() - now.getTime())),
          })),
      );
    });
    return rows;
  };

  return {
    /**
     * Makes one attempt for each due delivery among `ids`; the others are left alone. No transaction is
     * open while the endpoints are called: the claim commits first, the outcomes are recorded after.
     */
    async processBatch(em: Em, ids: string[]): Promise<number> {
      const now = clock.now();
      const claimed = await claim(em, ids, now);
      if (claimed.length === 0) return 0;
      const live = claimed.filter((d) => d.webhook_status === "ACTIVE" && !d.deleted_at);
      const abandoned = claimed.filter((d) => !live.includes(d));
      const outcomes = await Promise.all(live.map((d) => attempt(d, now)));
      const recorded = await record(em, outcomes, abandoned);
      for (const { d: delivery, r: result, status } of recorded) {
        o.onAttempt?.({
          firstAttempt: delivery.attempts === 0,
          sinceCreatedMs: now.getTime() - delivery.created_at.getTime(),
          ok: result.ok,
          latencyMs: result.latencyMs,
          outcome: status === "DELIVERED" ? "delivered" : status === "FAILED" ? "retrying" : "given_up",
        });
      }
      return outcomes.length;
    },

    /**
     * Re-queues deliveries that are overdue and held by no worker (their wake-up was lost, or the worker
     * holding them died). One sweeper runs at a time across all instances.
     */
    async sweep(em: Em, limit = 1_000): Promise<number> {
      return em.transactional(async (tx) => {
        const [lock] = await sql<{ ok: boolean }>(tx, "select pg_try_advisory_xact_lock(7104223321) as ok");
        if (!lock?.ok) return 0;
        const now = clock.now();
        const due = await sql<{ id: string }>(
          tx,
          `select id from webhook_deliveries
            where status in ('PENDING', 'FAILED')
              and next_attempt_at <= $1::timestamptz - make_interval(secs => $2::double precision / 1000)
              and (locked_until is null or locked_until < $1::timestamptz)
            order by next_attempt_at
            limit $3`,
          [now, o.sweepGraceMs, limit],
        );
        await outbox.enqueue(
          tx,
          due.map((d) => ({ id: d.id })),
        );
        if (due.length > 0) logger.info("re-queued overdue webhook deliveries", { count: due.length });
        return due.length;
      });
    },
  };
}
