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
import { callerOf, kTx } from "../platform/rpc/context.ts";
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
  const withStats = async (row: WebhookRow) => toWebhook(row, (await deliveries.stats([row.id])).get(row.id));
  return {
    async createWebhook(req, ctx) {
      const row = await webhooks.create(
        callerOf(ctx.values),
        { url: req.url, events: req.events, description: req.description },
        ctx.values.get(kTx),
      );
      return { webhook: toWebhook(row, (await deliveries.stats([row.id])).get(row.id), row.secret) };
    },
    async listWebhooks(_req, ctx) {
      const rows = await webhooks.list(callerOf(ctx.values));
      const stats = await deliveries.stats(rows.map((r) => r.id));
      return { webhooks: rows.map((r) => toWebhook(r, stats.get(r.id))) };
    },
    async getWebhook(req, ctx) {
      return { webhook: await withStats(await webhooks.get(callerOf(ctx.values), req.id)) };
    },
    async updateWebhook(req, ctx) {
      const row = await webhooks.update(
        callerOf(ctx.values),
        req.id,
        {
          url: req.url,
          description: req.description,
          addEvents: req.addEvents,
          removeEvents: req.removeEvents,
        },
        ctx.values.get(kTx),
      );
      return { webhook: await withStats(row) };
    },
    async deleteWebhook(req, ctx) {
      const given = await webhooks.delete(callerOf(ctx.values), req.id, ctx.values.get(kTx));
      return { id: req.id, deleted: true, deliveriesGivenUp: given };
    },
    async rotateWebhookSecret(req, ctx) {
      const row = await webhooks.rotateSecret(callerOf(ctx.values), req.id, ctx.values.get(kTx));
      return { webhook: toWebhook(row, (await deliveries.stats([row.id])).get(row.id), row.secret) };
    },
    async sendTestEvent(req, ctx) {
      const caller = callerOf(ctx.values);
      const tx = ctx.values.get(kTx);
      const id = await webhooks.sendTest(caller, req.id, req.eventType, tx);
      return { delivery: toDelivery(await deliveries.get(caller, id, tx)) };
    },
    async listDeliveries(req, ctx) {
      const page = await deliveries.list(callerOf(ctx.values), req.webhookId, req.limit, req.startingAfter);
      return { deliveries: page.deliveries.map(toDelivery), hasMore: page.hasMore };
    },
    async replayDelivery(req, ctx) {
      const caller = callerOf(ctx.values);
      const tx = ctx.values.get(kTx);
      const id = await webhooks.replay(caller, req.id, tx);
      return { delivery: toDelivery(await deliveries.get(caller, id, tx)) };
    },
    async getEvent(req, ctx) {
      const event = await deliveries.event(callerOf(ctx.values), req.id);
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
