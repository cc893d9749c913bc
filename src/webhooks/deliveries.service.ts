import type { Caller } from "../apikeys/api-key.service.ts";
import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId } from "../platform/ids.ts";

/** A delivery as partners see it. */
export interface DeliveryRow {
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  status: "PENDING" | "FAILED" | "DELIVERED" | "GIVEN_UP";
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  last_response_body: string | null;
  last_latency_ms: number | null;
  first_attempt_at: Date | null;
  next_attempt_at: Date | null;
  delivered_at: Date | null;
  given_up_at: Date | null;
  created_at: Date;
  test: boolean;
  replay_of: string | null;
}

/** Attempt statistics of the last 24 hours. */
export interface WebhookStats {
  delivered: number;
  failed: number;
  avgLatencyMs: number;
  p50LatencyMs: number;
  p95LatencyMs: number;
}

/** An event with the caller's deliveries. */
export interface EventView {
  id: string;
  type: string;
  body: string;
  createdAt: Date;
  deliveries: DeliveryRow[];
}

const DELIVERY_COLUMNS = `d.id, d.webhook_id, d.event_id, e.type as event_type, d.status, d.attempts, d.last_status_code,
  d.last_error, d.last_response_body, d.last_latency_ms, d.first_attempt_at, d.next_attempt_at, d.delivered_at,
  d.given_up_at, d.created_at, e.test, d.replay_of`;

const EMPTY_STATS: WebhookStats = {
  delivered: 0,
  failed: 0,
  avgLatencyMs: 0,
  p50LatencyMs: 0,
  p95LatencyMs: 0,
};

/** What {@link createDeliveriesService} returns. */
export type DeliveriesService = ReturnType<typeof createDeliveriesService>;

/** Reads of deliveries, events and stats, always within the caller's partner and environment. */
export function createDeliveriesService({ clock }: { clock: Clock }) {
  return {
    /** One delivery of the caller's. */
    async get(em: Em, caller: Caller, id: string): Promise<DeliveryRow> {
      const [row] = isId("dlv", id)
        ? await sql<DeliveryRow>(
            em,
            `select ${DELIVERY_COLUMNS} from webhook_deliveries d join events e on e.id = d.event_id
              where d.id = $1 and d.partner_id = $2 and d.environment = $3`,
            [id, caller.partnerId, caller.environment],
          )
        : [];
      if (!row) throw new ApiError("not_found", `No delivery ${id}.`);
      return row;
    },

    /** A page of a subscription's deliveries, newest first (ids are time-ordered). */
    async list(em: Em, caller: Caller, webhookId: string, limit: number, startingAfter: string) {
      if (!Number.isInteger(limit) || limit < 0 || limit > 100)
        throw validationFailed({ limit: "must be 1 to 100" });
      if (startingAfter !== "" && !isId("dlv", startingAfter)) {
        throw validationFailed({ startingAfter: "must be a delivery id from a previous page" });
      }
      const owned = isId("whk", webhookId)
        ? await sql(
            em,
            "select 1 from webhooks where id = $1 and partner_id = $2 and environment = $3 and deleted_at is null",
            [webhookId, caller.partnerId, caller.environment],
          )
        : [];
      if (owned.length === 0) throw new ApiError("not_found", `No webhook ${webhookId}.`);
      const size = limit || 20;
      const rows = await sql<DeliveryRow>(
        em,
        `select ${DELIVERY_COLUMNS} from webhook_deliveries d join events e on e.id = d.event_id
          where d.webhook_id = $1 and ($2 = '' or d.id < $2)
          order by d.id desc limit $3`,
        [webhookId, startingAfter, size + 1],
      );
      return { deliveries: rows.slice(0, size), hasMore: rows.length > size };
    },

    /** An event delivered to the caller's own webhooks, with those deliveries; anything else is not found. */
    async event(em: Em, caller: Caller, id: string): Promise<EventView> {
      const [event] = isId("evt", id)
        ? await sql<{ id: string; type: string; body: string; created_at: Date }>(
            em,
            "select id, type, body, created_at from events where id = $1 and partner_id = $2 and environment = $3",
            [id, caller.partnerId, caller.environment],
          )
        : [];
      const deliveries = event
        ? await sql<DeliveryRow>(
            em,
            `select ${DELIVERY_COLUMNS} from webhook_deliveries d join events e on e.id = d.event_id
              where d.event_id = $1 and d.partner_id = $2 and d.environment = $3 order by d.id`,
            [id, caller.partnerId, caller.environment],
          )
        : [];
      if (!event || deliveries.length === 0) throw new ApiError("not_found", `No event ${id}.`);
      return { id: event.id, type: event.type, body: event.body, createdAt: event.created_at, deliveries };
    },

    /** Attempt counts and latencies of the last 24 hours, per subscription. */
    async stats(em: Em, webhookIds: string[]): Promise<Map<string, WebhookStats>> {
      const out = new Map<string, WebhookStats>(webhookIds.map((id) => [id, EMPTY_STATS]));
      if (webhookIds.length === 0) return out;
      const rows = await sql<{
        webhook_id: string;
        delivered: number;
        failed: number;
        avg: number;
        p50: number;
        p95: number;
      }>(
        em,
        `select webhook_id,
                count(*) filter (where succeeded)::int as delivered,
                count(*) filter (where not succeeded)::int as failed,
                coalesce(round(avg(latency_ms)), 0)::int as avg,
                coalesce(round(percentile_cont(0.5) within group (order by latency_ms)), 0)::int as p50,
                coalesce(round(percentile_cont(0.95) within group (order by latency_ms)), 0)::int as p95
           from webhook_attempts
          where webhook_id = any($1::text[]) and started_at >= $2
          group by webhook_id`,
        [webhookIds, new Date(clock.now().getTime() - 24 * ms.hour)],
      );
      for (const r of rows) {
        out.set(r.webhook_id, {
          delivered: r.delivered,
          failed: r.failed,
          avgLatencyMs: r.avg,
          p50LatencyMs: r.p50,
          p95LatencyMs: r.p95,
        });
      }
      return out;
    },
  };
}
