import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  Delivery_Status,
  type DeliveryAttemptSchema,
  type DeliverySchema,
  type EventSchema,
  Webhook_Status,
  type WebhookService as WebhookApi,
  type WebhookSchema,
} from "../../gen/partner/v1/webhooks_pb.ts";
import type { Em } from "../platform/db/orm.ts";
import { emOf, replicaRead } from "../platform/rpc/context.ts";
import type { DeliveriesService, DeliveryView, WebhookAttempt, WebhookStats } from "./deliveries.service.ts";
import type { Event } from "./event.entity.ts";
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
    circuitOpenUntil: ts(row.circuitOpenUntil),
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

/** The delivery statuses a filter may name (the edge refuses any other value). */
const statusNames = ["PENDING", "FAILED", "DELIVERED", "GIVEN_UP"] as const;

/** An attempt in the contract's shape. */
function toAttempt(a: WebhookAttempt): MessageInitShape<typeof DeliveryAttemptSchema> {
  return {
    attempt: a.attempt,
    startedAt: timestampFromDate(a.startedAt),
    succeeded: a.succeeded,
    statusCode: a.statusCode ?? 0,
    error: a.error ?? "",
    latencyMs: a.latencyMs,
    responseBody: a.responseBody ?? "",
    signatureHeaders: a.signatureHeaders ?? {},
  };
}

/** An event in the contract's shape, with the deliveries given. */
function toEvent(event: Event, sent: DeliveryView[]): MessageInitShape<typeof EventSchema> {
  return {
    id: event.id,
    type: event.type,
    payload: JSON.parse(event.body),
    createdAt: timestampFromDate(event.createdAt),
    deliveries: sent.map(toDelivery),
  };
}

/** `partner.v1.WebhookService`: thin mapping between the contract and the services. */
export function createWebhookHandlers(
  webhooks: WebhookService,
  deliveries: DeliveriesService,
): ServiceImpl<typeof WebhookApi> {
  return { ...subscriptionHandlers(webhooks, deliveries), ...deliveryHandlers(webhooks, deliveries) };
}

/** The subscriptions themselves, each answered with its last 24 hours' stats. */
function subscriptionHandlers(webhooks: WebhookService, deliveries: DeliveriesService) {
  const withStats = async (em: Em, row: Webhook, secret?: string) =>
    toWebhook(row, (await deliveries.stats(em, [row.id])).get(row.id), secret);
  return {
    async createWebhook(req, ctx) {
      const em = emOf(ctx.values);
      const row = await webhooks.create(em, {
        url: req.url,
        events: req.events,
        description: req.description,
      });
      return { webhook: await withStats(em, row, row.secret) };
    },
    async listWebhooks(_req, ctx) {
      return replicaRead(ctx.values, async (em) => {
        const rows = await webhooks.list(em);
        const stats = await deliveries.stats(
          em,
          rows.map((r) => r.id),
        );
        return { webhooks: rows.map((r) => toWebhook(r, stats.get(r.id))) };
      });
    },
    async getWebhook(req, ctx) {
      return replicaRead(ctx.values, async (em) => ({
        webhook: await withStats(em, await webhooks.get(em, req.id)),
      }));
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
      return { webhook: await withStats(em, row, row.secret) };
    },
  } satisfies Partial<ServiceImpl<typeof WebhookApi>>;
}

/** Deliveries, their attempts and events: reads, test sends and replays. */
function deliveryHandlers(webhooks: WebhookService, deliveries: DeliveriesService) {
  return {
    async sendTestEvent(req, ctx) {
      const em = emOf(ctx.values);
      const id = await webhooks.sendTest(em, req.id, req.eventType);
      return { delivery: toDelivery(await deliveries.get(em, id)) };
    },
    async listDeliveries(req, ctx) {
      const statuses = req.status.flatMap((st) => statusNames.filter((name) => Delivery_Status[name] === st));
      const page = await replicaRead(ctx.values, (em) =>
        deliveries.list(em, req.webhookId, req.limit, req.startingAfter, statuses),
      );
      return { deliveries: page.deliveries.map(toDelivery), hasMore: page.hasMore };
    },
    async getDelivery(req, ctx) {
      return { delivery: toDelivery(await replicaRead(ctx.values, (em) => deliveries.get(em, req.id))) };
    },
    async listDeliveryAttempts(req, ctx) {
      const rows = await replicaRead(ctx.values, (em) => deliveries.attempts(em, req.id));
      return { attempts: rows.map(toAttempt) };
    },
    async replayFailedDeliveries(req, ctx) {
      const since = req.since ? timestampDate(req.since) : new Date(Number.NaN);
      return webhooks.replayFailed(emOf(ctx.values), req.id, since);
    },
    async getWebhookStats(req, ctx) {
      const { buckets, total } = await replicaRead(ctx.values, (em) => deliveries.hourly(em, req.id));
      return { buckets: buckets.map((b) => ({ ...b, startTime: timestampFromDate(b.startTime) })), total };
    },
    async listEvents(req, ctx) {
      const page = await replicaRead(ctx.values, (em) =>
        deliveries.events(em, req.limit, req.startingAfter, {
          type: req.type,
          userId: req.userId,
          objectId: req.objectId,
        }),
      );
      return { events: page.events.map((e) => toEvent(e, [])), hasMore: page.hasMore };
    },
    async replayDelivery(req, ctx) {
      const em = emOf(ctx.values);
      const id = await webhooks.replay(em, req.id);
      return { delivery: toDelivery(await deliveries.get(em, id)) };
    },
    async getEvent(req, ctx) {
      const { event, deliveries: sent } = await replicaRead(ctx.values, (em) => deliveries.event(em, req.id));
      return { event: toEvent(event, sent) };
    },
  } satisfies Partial<ServiceImpl<typeof WebhookApi>>;
}
