import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { tenantOf } from "../platform/tenancy.ts";
import { type WebhookAttempt, WebhookAttemptEntity } from "./attempt.entity.ts";
import { type Event, EventEntity } from "./event.entity.ts";
import { FIRST_DELIVERY_ID_SQL } from "./webhook-partition.repository.ts";

/** One hour's attempts of a subscription. */
export interface StatsBucket {
  /** 0 for the hour that starts 24 hours ago, 23 for the last. */
  index: number;
  delivered: number;
  failed: number;
  p50LatencyMs: number;
  p95LatencyMs: number;
}

/** A delivery that may be replayed, oldest first. */
export interface Replayable {
  id: string;
  event_id: string;
}

/**
 * The portal's reads of the delivery log (attempts, hourly stats, the event list) and the search behind
 * "replay every failed delivery since". Callers have already found the delivery or subscription through the
 * tenancy filter; the raw statements name the tenant from `em` as well.
 */
export const deliveryLogRepository = {
  /** The attempts of a delivery the caller owns, oldest first (a delivery makes a few dozen at most). */
  listAttempts(em: Em, deliveryId: string, max: number): Promise<WebhookAttempt[]> {
    return em.find(
      WebhookAttemptEntity,
      { deliveryId },
      { orderBy: { attempt: "asc", id: "asc" }, limit: max },
    );
  },

  /**
   * One subscription's attempts since `since`, in hourly buckets counted from `since` (the last bucket also
   * takes anything later, so the buckets add up to the 24-hour stats). Reads `attempts_by_webhook_time`.
   */
  hourly(em: Em, webhookId: string, since: Date): Promise<StatsBucket[]> {
    return sql<StatsBucket>(
      em,
      `select least(23, floor(extract(epoch from started_at - $2::timestamptz) / 3600))::int as index,
              count(*) filter (where succeeded)::int as "delivered",
              count(*) filter (where not succeeded)::int as "failed",
              coalesce(round(percentile_cont(0.5) within group (order by latency_ms)), 0)::int as "p50LatencyMs",
              coalesce(round(percentile_cont(0.95) within group (order by latency_ms)), 0)::int as "p95LatencyMs"
         from webhook_attempts
        where webhook_id = $1 and started_at >= $2
        group by 1 order by 1`,
      [webhookId, since],
    );
  },

  /**
   * Deliveries of a subscription of `em`'s tenant that ended FAILED or GIVEN_UP, created at or after `since`,
   * not yet replayed, oldest first; one more than `limit` says more remain. Reads `deliveries_by_webhook_status`
   * and `deliveries_by_replay_of`.
   */
  replayable(em: Em, webhookId: string, since: Date, limit: number): Promise<Replayable[]> {
    const t = tenantOf(em);
    return sql<Replayable>(
      em,
      `select d.id, d.event_id from webhook_deliveries d
        where d.webhook_id = $1 and d.partner_id = $2 and d.environment = $3
          and d.status in ('FAILED', 'GIVEN_UP') and d.created_at >= $4
          and not exists (select 1 from webhook_deliveries r where r.replay_of = d.id)
        order by d.created_at, d.id
        limit $5`,
      [webhookId, t.partnerId, t.environment, since, limit + 1],
    );
  },

  /** Writes the replays of `originals` (new ids given), PENDING now, for `em`'s tenant. */
  async insertReplays(
    em: Em,
    webhookId: string,
    rows: { id: string; original: Replayable }[],
    now: Date,
  ): Promise<void> {
    const t = tenantOf(em);
    await sql(
      em,
      `insert into webhook_deliveries (id, event_id, webhook_id, partner_id, environment, status, next_attempt_at,
                                       created_at, replay_of)
       select u.id, u.event_id, $3, $4, $5, 'PENDING', $6, $6, u.replay_of
         from unnest($1::text[], $2::text[], $7::text[]) as u (id, event_id, replay_of)`,
      [
        rows.map((r) => r.id),
        rows.map((r) => r.original.event_id),
        webhookId,
        t.partnerId,
        t.environment,
        now,
        rows.map((r) => r.original.id),
      ],
    );
  },

  /**
   * A page of `em`'s tenant's events that have a delivery, newest first, optionally of one type, after the
   * event `startingAfter` (which must be the tenant's). Reads `events_by_owner`, one more than `limit`.
   */
  async listEvents(em: Em, limit: number, startingAfter: string, type: string): Promise<Event[] | null> {
    const t = tenantOf(em);
    let cursor: { created_at: Date; id: string } | undefined;
    if (startingAfter) {
      const found = await em.findOne(EventEntity, { id: startingAfter }, { fields: ["id", "createdAt"] });
      if (!found) return null;
      cursor = { created_at: found.createdAt, id: found.id };
    }
    const ids = await sql<{ id: string }>(
      em,
      `select e.id from events e
        where e.partner_id = $1 and e.environment = $2
          and ($3::text = '' or e.type = $3)
          and ($4::timestamptz is null or (e.created_at, e.id) < ($4::timestamptz, $5::text))
          and exists (select 1 from webhook_deliveries d where d.event_id = e.id and d.id >= ${FIRST_DELIVERY_ID_SQL})
        order by e.created_at desc, e.id desc
        limit $6`,
      [t.partnerId, t.environment, type, cursor?.created_at ?? null, cursor?.id ?? "", limit + 1],
    );
    if (ids.length === 0) return [];
    const rows = await em.find(EventEntity, { id: { $in: ids.map((r) => r.id) } });
    const byId = new Map(rows.map((r) => [r.id, r]));
    return ids.map((r) => byId.get(r.id)).filter((e): e is Event => e !== undefined);
  },
};
