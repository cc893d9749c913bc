import { LockMode } from "@mikro-orm/core";
import { encodeTime } from "ulid";
import type { Em } from "../platform/db/orm.ts";
import { deleteInBatches } from "../platform/db/purge.ts";
import { sql } from "../platform/db/sql.ts";
import { type Tenant, tenantOf } from "../platform/tenancy.ts";
import { type WebhookDelivery, WebhookDeliveryEntity } from "./delivery.entity.ts";
import { EventEntity } from "./event.entity.ts";
import type { EventSubject } from "./outbox.service.ts";
import { type Webhook, WebhookEntity } from "./webhook.entity.ts";
import { firstDeliveryIdOf } from "./webhook-partition.repository.ts";

/** A delivery as partners see it: the row, with its event's type and test flag. */
export type DeliveryView = WebhookDelivery & { eventType: string; test: boolean };

/** Attempt statistics of the last 24 hours. */
export interface WebhookStats {
  delivered: number;
  failed: number;
  avgLatencyMs: number;
  p50LatencyMs: number;
  p95LatencyMs: number;
}

/**
 * The webhooks feature's tables (webhooks, events, webhook_deliveries, webhook_attempts) as the partner API and
 * the outbox read and write them. Reads for a partner go through the tenancy filter the edge set on `em`; the
 * raw statements take the tenant from `em` too, or are the worker's, which serves every tenant. The delivery
 * worker's own statements are in `delivery-worker.repository.ts`, the portal's delivery log in
 * `delivery-log.repository.ts`, the retention purge in `webhook-retention.repository.ts`.
 */
export const webhookRepository = {
  /** A live subscription of `em`'s tenant, locked when asked; another tenant's is simply not found. */
  findWebhook(em: Em, id: string, lock = false): Promise<Webhook | null> {
    return em.findOne(
      WebhookEntity,
      { id, deletedAt: null },
      lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {},
    );
  },

  /** The tenant's live subscriptions, oldest first. */
  listWebhooks(em: Em): Promise<Webhook[]> {
    return em.find(WebhookEntity, { deletedAt: null }, { orderBy: { createdAt: "asc", id: "asc" } });
  },

  /** Serialises subscription creates of `em`'s tenant until the transaction ends (so the cap holds). */
  async lockTenantWebhooks(tx: Em): Promise<void> {
    const t = tenantOf(tx);
    await sql(tx, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [
      `webhooks:${t.partnerId}:${t.environment}`,
    ]);
  },

  countWebhooks(em: Em): Promise<number> {
    return em.count(WebhookEntity, { deletedAt: null });
  },

  /** Adds a subscription for `em`'s tenant. */
  async insertWebhook(
    em: Em,
    row: Omit<
      Webhook,
      | "partnerId"
      | "environment"
      | "previousSecretEnc"
      | "previousSecretExpiresAt"
      | "deletedAt"
      | "failureStreak"
      | "circuitOpenedAt"
      | "circuitOpenUntil"
    >,
  ): Promise<Webhook> {
    const tenant = tenantOf(em);
    const webhook = em.create(WebhookEntity, {
      ...row,
      partnerId: tenant.partnerId,
      environment: tenant.environment,
      previousSecretEnc: null,
      previousSecretExpiresAt: null,
      deletedAt: null,
      failureStreak: 0,
      circuitOpenedAt: null,
      circuitOpenUntil: null,
    });
    await em.flush();
    return webhook;
  },

  /** Writes the changes made to loaded subscriptions. */
  save(em: Em): Promise<void> {
    return em.flush();
  },

  /** Gives up a subscription's pending deliveries (it was deleted or disabled); returns how many. */
  async giveUpDeliveries(em: Em, webhookIds: string[], now: Date): Promise<number> {
    if (webhookIds.length === 0) return 0;
    const rows = await sql(
      em,
      `update webhook_deliveries set status = 'GIVEN_UP', given_up_at = $2, next_attempt_at = null, locked_until = null
        where webhook_id = any($1::text[]) and status in ('PENDING', 'FAILED') returning id`,
      [webhookIds, now],
    );
    return rows.length;
  },

  /** One delivery of `em`'s tenant, with its event's type. */
  async findDelivery(em: Em, id: string): Promise<DeliveryView | null> {
    const delivery = await em.findOne(WebhookDeliveryEntity, { id });
    if (!delivery) return null;
    const [view] = await withEvents(em, [delivery]);
    return view ?? null;
  },

  /** Whether `id` is a delivery of `em`'s tenant to the subscription `webhookId` (a page's cursor). */
  async hasDelivery(em: Em, webhookId: string, id: string): Promise<boolean> {
    return (await em.count(WebhookDeliveryEntity, { id, webhookId })) > 0;
  },

  /** A page of a subscription's deliveries, newest first (ids are time-ordered), in `statuses` if any. */
  async listDeliveries(
    em: Em,
    webhookId: string,
    limit: number,
    startingAfter: string,
    statuses: readonly WebhookDelivery["status"][] = [],
  ) {
    const rows = await em.find(
      WebhookDeliveryEntity,
      {
        webhookId,
        ...(startingAfter ? { id: { $lt: startingAfter } } : {}),
        ...(statuses.length > 0 ? { status: { $in: [...statuses] } } : {}),
      },
      { orderBy: { id: "desc" }, limit: limit + 1 },
    );
    return { deliveries: await withEvents(em, rows.slice(0, limit)), hasMore: rows.length > limit };
  },

  /** An event of `em`'s tenant with every delivery of it, oldest first. */
  async findEvent(em: Em, id: string) {
    const event = await em.findOne(EventEntity, { id });
    if (!event) return null;
    const deliveries = await em.find(
      WebhookDeliveryEntity,
      { eventId: id, id: { $gte: firstDeliveryIdOf(id) } },
      { orderBy: { id: "asc" } },
    );
    return {
      event,
      deliveries: deliveries.map((d) => Object.assign(d, { eventType: event.type, test: event.test })),
    };
  },

  /** A new delivery of an earlier delivery's event, to the same subscription (a replay). */
  async insertReplay(em: Em, id: string, original: WebhookDelivery, now: Date): Promise<void> {
    const tenant = tenantOf(em);
    em.create(WebhookDeliveryEntity, {
      id,
      eventId: original.eventId,
      webhookId: original.webhookId,
      partnerId: tenant.partnerId,
      environment: tenant.environment,
      status: "PENDING",
      nextAttemptAt: now,
      createdAt: now,
      replayOf: original.id,
    });
    await em.flush();
  },

  /** Attempt counts and latencies of the last 24 hours, per subscription (ids the caller already owns). */
  async stats(em: Em, webhookIds: string[], since: Date): Promise<Map<string, WebhookStats>> {
    const out = new Map<string, WebhookStats>();
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
      [webhookIds, since],
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

  /** The ACTIVE subscriptions of a tenant (the outbox picks those an event matches). */
  activeSubscriptions(
    em: Em,
    tenant: Tenant,
    onlyWebhookId: string | undefined,
  ): Promise<{ id: string; events: string[] }[]> {
    return sql(
      em,
      `select id, events from webhooks
        where partner_id = $1 and environment = $2 and status = 'ACTIVE' and deleted_at is null
          and ($3::text is null or id = $3)`,
      [tenant.partnerId, tenant.environment, onlyWebhookId ?? null],
    );
  },

  /** Writes an event and one PENDING delivery per subscription, in one round trip each. */
  async insertEvent(
    em: Em,
    e: {
      id: string;
      tenant: Tenant;
      type: string;
      body: string;
      test: boolean;
      at: Date;
      subject: EventSubject;
    },
    deliveries: { id: string; webhookId: string }[],
  ): Promise<void> {
    await sql(
      em,
      `insert into events (id, partner_id, environment, type, body, test, created_at, user_id, object_id)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        e.id,
        e.tenant.partnerId,
        e.tenant.environment,
        e.type,
        e.body,
        e.test,
        e.at,
        e.subject.userId ?? null,
        e.subject.objectId ?? null,
      ],
    );
    await sql(
      em,
      `insert into webhook_deliveries (id, event_id, webhook_id, partner_id, environment, status, next_attempt_at, created_at)
       select d.id, $2, d.webhook_id, $3, $4, 'PENDING', $5, $5
         from unnest($1::text[], $6::text[]) as d (id, webhook_id)`,
      [
        deliveries.map((d) => d.id),
        e.id,
        e.tenant.partnerId,
        e.tenant.environment,
        e.at,
        deliveries.map((d) => d.webhookId),
      ],
    );
  },

  /**
   * Deletes attempts started before `before`, a batch at a time; returns how many. An attempt starts after its
   * delivery is created, so only the partitions of deliveries made before `before` are read.
   */
  purgeAttempts(em: Em, before: Date, batch = 5_000): Promise<number> {
    return deleteInBatches(
      em,
      `delete from webhook_attempts where (delivery_id, id) in (
         select delivery_id, id from webhook_attempts where delivery_id < $3 and started_at < $1 limit $2) returning 1`,
      [before, batch, `dlv_${encodeTime(before.getTime(), 10)}`],
      batch,
    );
  },
};

/** Adds each delivery's event type and test flag (one query for the page). */
async function withEvents(em: Em, deliveries: WebhookDelivery[]): Promise<DeliveryView[]> {
  if (deliveries.length === 0) return [];
  const events = await em.find(
    EventEntity,
    { id: { $in: [...new Set(deliveries.map((d) => d.eventId))] } },
    { fields: ["id", "type", "test"] },
  );
  const byId = new Map(events.map((e) => [e.id, e]));
  return deliveries.map((d) => {
    const e = byId.get(d.eventId);
    return Object.assign(d, { eventType: e?.type ?? "", test: e?.test ?? false });
  });
}
