import type { Clock } from "../platform/clock.ts";
import { ms } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { ApiError, validationFailed } from "../platform/errors.ts";
import { isId } from "../platform/ids.ts";
import type { Event } from "./event.entity.ts";
import { type DeliveryView, webhookRepository as repo, type WebhookStats } from "./webhook.repository.ts";

export type { DeliveryView, WebhookStats };

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

    /** A page of a subscription's deliveries, newest first (ids are time-ordered). */
    async list(em: Em, webhookId: string, limit: number, startingAfter: string) {
      if (!Number.isInteger(limit) || limit < 0 || limit > 100)
        throw validationFailed({ limit: "must be 1 to 100" });
      if (startingAfter !== "" && !isId("dlv", startingAfter)) {
        throw validationFailed({ startingAfter: "must be a delivery id from a previous page" });
      }
      const owned = isId("whk", webhookId) ? await repo.findWebhook(em, webhookId) : null;
      if (!owned) throw new ApiError("not_found", `No webhook ${webhookId}.`);
      return repo.listDeliveries(em, webhookId, limit || 20, startingAfter);
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
