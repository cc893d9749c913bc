import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { type Tenant, tenantOf } from "../platform/tenancy.ts";
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

/** What a page of events is restricted to; an empty string filters nothing. */
export interface EventFilter {
  type: string;
  /** Only events about this user (the `user_id` column, indexed by `events_by_user`). */
  userId: string;
  /** Only events about this disbursement or consent (the `object_id` column, indexed by `events_by_object`). */
  objectId: string;
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
   * A page of `em`'s tenant's events that have a delivery, newest first, restricted by `filter`, after the
   * event `startingAfter` (which must be the tenant's). One more than `limit`: see {@link eventsPage}.
   */
  async listEvents(
    em: Em,
    limit: number,
    startingAfter: string,
    filter: EventFilter,
  ): Promise<Event[] | null> {
    let after: EventsCursor | undefined;
    if (startingAfter) {
      const found = await em.findOne(EventEntity, { id: startingAfter }, { fields: ["id", "createdAt"] });
      if (!found) return null;
      after = { createdAt: found.createdAt, id: found.id };
    }
    const page = eventsPage(tenantOf(em), filter, after, limit + 1);
    const ids = await sql<{ id: string }>(em, page.text, page.params);
    if (ids.length === 0) return [];
    const rows = await em.find(EventEntity, { id: { $in: ids.map((r) => r.id) } });
    const byId = new Map(rows.map((r) => [r.id, r]));
    return ids.map((r) => byId.get(r.id)).filter((e): e is Event => e !== undefined);
  },
};

/** Where a page of events starts: after this event, in the list's order. */
export interface EventsCursor {
  createdAt: Date;
  id: string;
}

/**
 * The statement behind {@link deliveryLogRepository.listEvents}: the ids of up to `limit` of the tenant's events
 * that have a delivery, newest first. Each filter, and the cursor, is written only when given, as a plain
 * comparison the planner can take as an index condition: with an object the page is a range of
 * `events_by_object`, with a user of `events_by_user`, else of `events_by_owner`, read in the list's order on each
 * monthly partition and stopped at `limit` (never a scan of the tenant's events).
 */
export function eventsPage(
  t: Tenant,
  filter: EventFilter,
  after: EventsCursor | undefined,
  limit: number,
): { text: string; params: unknown[] } {
  const params: unknown[] = [t.partnerId, t.environment, limit];
  const arg = (value: unknown) => `$${params.push(value)}`;
  const conditions = [
    filter.type && `e.type = ${arg(filter.type)}`,
    filter.userId && `e.user_id = ${arg(filter.userId)}`,
    filter.objectId && `e.object_id = ${arg(filter.objectId)}`,
    after && `(e.created_at, e.id) < (${arg(after.createdAt)}::timestamptz, ${arg(after.id)}::text)`,
  ].filter((c): c is string => Boolean(c));
  const text = `select e.id from events e
     where e.partner_id = $1 and e.environment = $2${conditions.map((c) => ` and ${c}`).join("")}
       and exists (select 1 from webhook_deliveries d where d.event_id = e.id and d.id >= ${FIRST_DELIVERY_ID_SQL})
     order by e.created_at desc, e.id desc
     limit $3`;
  return { text, params };
}
