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
import { emOf } from "../platform/rpc/context.ts";
import type { DeliveriesService, DeliveryView, WebhookStats } from "./deliveries.service.ts";
import type { Webhook } from "./webhook.entity.ts";
import type { WebhookService } from "./webhook.service.ts";

const ts = (d: Date | null | undefined) => (d ? timestampFromDate(d) : undefined);

function toWebhook(row: Webhook, stats?: WebhookStats, secret = ""): MessageInitShape<typeof WebhookSchema> {
  return {
    id: row.id,
    url: row.url,
    events: row.events,
    description: row.description,
    status: Webhook_Status[row.status],
    disabledReason: row.disabledReason ?? "",
    secret,
    previousSecretExpiresAt: ts(row.previousSecretExpiresAt),
    stats,
    createdAt: ts(row.createdAt),
    updatedAt: ts(row.updatedAt),
  };
}

/** A delivery in the contract's shape. */
export function toDelivery(d: DeliveryView): MessageInitShape<typeof DeliverySchema> {
  return {
    id: d.id,
    webhookId: d.webhookId,
    eventId: d.eventId,
    eventType: d.eventType,
    status: Delivery_Status[d.status],
    attempt: d.attempts,
    lastStatusCode: d.lastStatusCode ?? 0,
    lastError: d.lastError ?? "",
    lastResponseBody: d.lastResponseBody ?? "",
    lastLatencyMs: d.lastLatencyMs ?? 0,
    firstAttemptAt: ts(d.firstAttemptAt),
    nextAttemptAt: ts(d.nextAttemptAt),
    deliveredAt: ts(d.deliveredAt),
    givenUpAt: ts(d.givenUpAt),
    createdAt: ts(d.createdAt),
    test: d.test,
    replayOf: d.replayOf ?? "",
  };
}

/** `partner.v1.WebhookService`: thin mapping between the contract and the services. */
export function createWebhookHandlers(
  webhooks: WebhookService,
  deliveries: DeliveriesService,
): ServiceImpl<typeof WebhookApi> {
  const withStats = async (em: Em, row: Webhook) =>
    toWebhook(row, (await deliveries.stats(em, [row.id])).get(row.id));
  return {
    async createWebhook(req, ctx) {
      const em = emOf(ctx.values);
      const row = await webhooks.create(em, {
        url: req.url,
        events: req.events,
        description: req.description,
      });
      return { webhook: toWebhook(row, (await deliveries.stats(em, [row.id])).get(row.id), row.secret) };
    },
    async listWebhooks(_req, ctx) {
      const em = emOf(ctx.values);
      const rows = await webhooks.list(em);
      const stats = await deliveries.stats(
        em,
        rows.map((r) => r.id),
      );
      return { webhooks: rows.map((r) => toWebhook(r, stats.get(r.id))) };
    },
    async getWebhook(req, ctx) {
      const em = emOf(ctx.values);
      return { webhook: await withStats(em, await webhooks.get(em, req.id)) };
    },
    async updateWebhook(req, ctx) {
      const em = emOf(ctx.values);
      const row = await webhooks.update(em, req.id, {
        url: req.url,
        description: req.description,
        addEvents: req.addEvents,
        removeEvents: req.removeEvents,
      });
      return { webhook: await withStats(em, row) };
    },
    async deleteWebhook(req, ctx) {
      const given = await webhooks.delete(emOf(ctx.values), req.id);
      return { id: req.id, deleted: true, deliveriesGivenUp: given };
    },
    async rotateWebhookSecret(req, ctx) {
      const em = emOf(ctx.values);
      const row = await webhooks.rotateSecret(em, req.id);
      return { webhook: toWebhook(row, (await deliveries.stats(em, [row.id])).get(row.id), row.secret) };
    },
    async sendTestEvent(req, ctx) {
      const em = emOf(ctx.values);
      const id = await webhooks.sendTest(em, req.id, req.eventType);
      return { delivery: toDelivery(await deliveries.get(em, id)) };
    },
    async listDeliveries(req, ctx) {
      const page = await deliveries.list(emOf(ctx.values), req.webhookId, req.limit, req.startingAfter);
      return { deliveries: page.deliveries.map(toDelivery), hasMore: page.hasMore };
    },
    async replayDelivery(req, ctx) {
      const em = emOf(ctx.values);
      const id = await webhooks.replay(em, req.id);
      return { delivery: toDelivery(await deliveries.get(em, id)) };
    },
    async getEvent(req, ctx) {
      const { event, deliveries: sent } = await deliveries.event(emOf(ctx.values), req.id);
      return {
        event: {
          id: event.id,
          type: event.type,
          payload: JSON.parse(event.body),
          createdAt: timestampFromDate(event.createdAt),
          deliveries: sent.map(toDelivery),
        },
      };
    },
  };
}
