import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  Delivery_Status,
  type DeliverySchema,
  Webhook_Status,
  type WebhookService as WebhookApi,
  type WebhookSchema,
} from "../../gen/partner/v1/webhooks_pb.ts";
import type { Em } from "../platform/db/orm.ts";
import { callerOf, emOf } from "../platform/rpc/context.ts";
import type { DeliveriesService, DeliveryRow, WebhookStats } from "./deliveries.service.ts";
import type { WebhookRow, WebhookService } from "./webhook.service.ts";

const ts = (d: Date | null | undefined) => (d ? timestampFromDate(d) : undefined);

function toWebhook(
  row: WebhookRow,
  stats?: WebhookStats,
  secret = "",
): MessageInitShape<typeof WebhookSchema> {
  return {
    id: row.id,
    url: row.url,
    events: row.events,
    description: row.description,
    status: Webhook_Status[row.status],
    disabledReason: row.disabled_reason ?? "",
    secret,
    previousSecretExpiresAt: ts(row.previous_secret_expires_at),
    stats,
    createdAt: ts(row.created_at),
    updatedAt: ts(row.updated_at),
  };
}

/** A delivery in the contract's shape. */
export function toDelivery(d: DeliveryRow): MessageInitShape<typeof DeliverySchema> {
  return {
    id: d.id,
    webhookId: d.webhook_id,
    eventId: d.event_id,
    eventType: d.event_type,
    status: Delivery_Status[d.status],
    attempt: d.attempts,
    lastStatusCode: d.last_status_code ?? 0,
    lastError: d.last_error ?? "",
    lastResponseBody: d.last_response_body ?? "",
    lastLatencyMs: d.last_latency_ms ?? 0,
    firstAttemptAt: ts(d.first_attempt_at),
    nextAttemptAt: ts(d.next_attempt_at),
    deliveredAt: ts(d.delivered_at),
    givenUpAt: ts(d.given_up_at),
    createdAt: ts(d.created_at),
    test: d.test,
    replayOf: d.replay_of ?? "",
  };
}

/** `partner.v1.WebhookService`: thin mapping between the contract and the services. */
export function createWebhookHandlers(
  webhooks: WebhookService,
  deliveries: DeliveriesService,
): ServiceImpl<typeof WebhookApi> {
  const withStats = async (em: Em, row: WebhookRow) =>
    toWebhook(row, (await deliveries.stats(em, [row.id])).get(row.id));
  return {
    async createWebhook(req, ctx) {
      const em = emOf(ctx.values);
      const row = await webhooks.create(em, callerOf(ctx.values), {
        url: req.url,
        events: req.events,
        description: req.description,
      });
      return { webhook: toWebhook(row, (await deliveries.stats(em, [row.id])).get(row.id), row.secret) };
    },
    async listWebhooks(_req, ctx) {
      const em = emOf(ctx.values);
      const rows = await webhooks.list(em, callerOf(ctx.values));
      const stats = await deliveries.stats(
        em,
        rows.map((r) => r.id),
      );
      return { webhooks: rows.map((r) => toWebhook(r, stats.get(r.id))) };
    },
    async getWebhook(req, ctx) {
      const em = emOf(ctx.values);
      return { webhook: await withStats(em, await webhooks.get(em, callerOf(ctx.values), req.id)) };
    },
    async updateWebhook(req, ctx) {
      const em = emOf(ctx.values);
      const row = await webhooks.update(em, callerOf(ctx.values), req.id, {
        url: req.url,
        description: req.description,
        addEvents: req.addEvents,
        removeEvents: req.removeEvents,
      });
      return { webhook: await withStats(em, row) };
    },
    async deleteWebhook(req, ctx) {
      const given = await webhooks.delete(emOf(ctx.values), callerOf(ctx.values), req.id);
      return { id: req.id, deleted: true, deliveriesGivenUp: given };
    },
    async rotateWebhookSecret(req, ctx) {
      const em = emOf(ctx.values);
      const row = await webhooks.rotateSecret(em, callerOf(ctx.values), req.id);
      return { webhook: toWebhook(row, (await deliveries.stats(em, [row.id])).get(row.id), row.secret) };
    },
    async sendTestEvent(req, ctx) {
      const caller = callerOf(ctx.values);
      const em = emOf(ctx.values);
      const id = await webhooks.sendTest(em, caller, req.id, req.eventType);
      return { delivery: toDelivery(await deliveries.get(em, caller, id)) };
    },
    async listDeliveries(req, ctx) {
      const page = await deliveries.list(
        emOf(ctx.values),
        callerOf(ctx.values),
        req.webhookId,
        req.limit,
        req.startingAfter,
      );
      return { deliveries: page.deliveries.map(toDelivery), hasMore: page.hasMore };
    },
    async replayDelivery(req, ctx) {
      const caller = callerOf(ctx.values);
      const em = emOf(ctx.values);
      const id = await webhooks.replay(em, caller, req.id);
      return { delivery: toDelivery(await deliveries.get(em, caller, id)) };
    },
    async getEvent(req, ctx) {
      const event = await deliveries.event(emOf(ctx.values), callerOf(ctx.values), req.id);
      return {
        event: {
          id: event.id,
          type: event.type,
          payload: JSON.parse(event.body),
          createdAt: timestampFromDate(event.createdAt),
          deliveries: event.deliveries.map(toDelivery),
        },
      };
    },
  };
}
