import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId } from "../platform/ids.ts";
import { unknownCursor } from "../platform/paging.ts";
import type { WebhookAttempt } from "./attempt.entity.ts";
import type { WebhookDelivery } from "./delivery.entity.ts";
import {
  type EventFilter,
  deliveryLogRepository as log,
  type StatsBucket,
} from "./delivery-log.repository.ts";
import type { Event } from "./event.entity.ts";
import { type DeliveryView, webhookRepository as repo, type WebhookStats } from "./webhook.repository.ts";

export type { DeliveryView, EventFilter, WebhookAttempt, WebhookStats };

/** A subscription's last 24 hours: 24 hourly buckets, oldest first, and their total. */
export interface HourlyStats {
  buckets: (Omit<StatsBucket, "index"> & { startTime: Date })[];
  total: WebhookStats;
}

/** More attempts than any delivery makes in its 14 days (about 24 on the schedule, plus circuit probes). */
const MAX_ATTEMPTS_LISTED = 500;
const HOURS = 24;

/** An event with the caller's deliveries. */
export interface EventView {
  event: Event;
  deliveries: DeliveryView[];
}

const EMPTY_STATS: WebhookStats = {
  delivered: 0,
  failed: 0,
  avgLatencyMs: 0,
  p50LatencyMs: 0,
  p95LatencyMs: 0,
};

/** What {@link createDeliveriesService} returns. */
export type DeliveriesService = ReturnType<typeof createDeliveriesService>;

/** Reads of deliveries, events and stats, always within the tenant of the `em` they are given. */
export function createDeliveriesService({ clock }: { clock: Clock }) {
  return {
    /** One delivery of the caller's. */
    async get(em: Em, id: string): Promise<DeliveryView> {
      const row = isId("dlv", id) ? await repo.findDelivery(em, id) : null;
      if (!row) throw new ApiError("not_found", `No delivery ${id}.`);
      return row;
    },

    /** A page of a subscription's deliveries, newest first (ids are time-ordered), in `statuses` if any. */
    async list(
      em: Em,
      webhookId: string,
      limit: number,
      startingAfter: string,
      statuses: readonly WebhookDelivery["status"][] = [],
    ) {
      if (!Number.isInteger(limit) || limit < 0 || limit > 100)
        throw validationFailed({ limit: "must be 1 to 100" });
      if (startingAfter !== "" && !isId("dlv", startingAfter)) {
        throw validationFailed({ startingAfter: "must be a delivery id from a previous page" });
      }
      const owned = isId("whk", webhookId) ? await repo.findWebhook(em, webhookId) : null;
      if (!owned) throw new ApiError("not_found", `No webhook ${webhookId}.`);
      // A well-formed id that is not one of this subscription's deliveries is no cursor, as on every list.
      if (startingAfter !== "" && !(await repo.hasDelivery(em, webhookId, startingAfter)))
        throw unknownCursor("deliveries of this webhook");
      return repo.listDeliveries(em, webhookId, limit || 20, startingAfter, [...new Set(statuses)]);
    },

    /** The attempts of one delivery of the caller's, oldest first; another tenant's delivery is not found. */
    async attempts(em: Em, deliveryId: string): Promise<WebhookAttempt[]> {
      const owned = isId("dlv", deliveryId) ? await repo.findDelivery(em, deliveryId) : null;
      if (!owned) throw new ApiError("not_found", `No delivery ${deliveryId}.`);
      return log.listAttempts(em, deliveryId, MAX_ATTEMPTS_LISTED);
    },

    /** A subscription's last 24 hours in hourly buckets counted from exactly 24 hours ago, with the total. */
    async hourly(em: Em, webhookId: string): Promise<HourlyStats> {
      const owned = isId("whk", webhookId) ? await repo.findWebhook(em, webhookId) : null;
      if (!owned) throw new ApiError("not_found", `No webhook ${webhookId}.`);
      const since = new Date(clock.now().getTime() - HOURS * ms.hour);
      const found = new Map((await log.hourly(em, webhookId, since)).map((b) => [b.index, b]));
      const total = (await repo.stats(em, [webhookId], since)).get(webhookId) ?? EMPTY_STATS;
      const buckets = Array.from({ length: HOURS }, (_, i) => {
        const { index: _index, ...b } = found.get(i) ?? {
          index: i,
          delivered: 0,
          failed: 0,
          p50LatencyMs: 0,
          p95LatencyMs: 0,
        };
        return { ...b, startTime: new Date(since.getTime() + i * ms.hour) };
      });
      return { buckets, total };
    },

    /**
     * A page of the caller's events that were delivered to its webhooks, newest first, of one type, about one
     * user or about one object when those are given (an empty string filters nothing).
     */
    async events(em: Em, limit: number, startingAfter: string, filter: EventFilter) {
      if (!Number.isInteger(limit) || limit < 0 || limit > 100)
        throw validationFailed({ limit: "must be 1 to 100" });
      if (startingAfter !== "" && !isId("evt", startingAfter))
        throw validationFailed({ startingAfter: "must be an event id from a previous page" });
      const n = limit || 20;
      const rows = await log.listEvents(em, n, startingAfter, filter);
      // A well-formed id that is not one of the caller's events is no cursor, as on every list.
      if (!rows) throw unknownCursor("events");
      return { events: rows.slice(0, n), hasMore: rows.length > n };
    },

    /** An event delivered to the caller's own webhooks, with those deliveries; anything else is not found. */
    async event(em: Em, id: string): Promise<EventView> {
      const found = isId("evt", id) ? await repo.findEvent(em, id) : null;
      if (!found || found.deliveries.length === 0) throw new ApiError("not_found", `No event ${id}.`);
      return found;
    },

    /** Attempt counts and latencies of the last 24 hours, per subscription of the caller's. */
    async stats(em: Em, webhookIds: string[]): Promise<Map<string, WebhookStats>> {
      const found = await repo.stats(em, webhookIds, new Date(clock.now().getTime() - 24 * ms.hour));
      return new Map(webhookIds.map((id) => [id, found.get(id) ?? EMPTY_STATS]));
    },
  };
}
