import type { Environment } from "../apikeys/api-key.entity.ts";
import type { Clock } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { sql } from "../platform/db/sql.ts";
import { newId } from "../platform/ids.ts";
import type { Jobs } from "../platform/jobs/jobs.ts";
import { type EventType, subscribed } from "./event-types.ts";

/** The queue that wakes the delivery worker; its jobs carry only the delivery id. */
export const DELIVER_QUEUE = "webhooks.deliver";

/** An event to raise. */
export interface RaiseInput {
  partnerId: string;
  environment: Environment;
  type: EventType;
  payload: Record<string, unknown>;
  /** A synthetic test event: `test: true` in the body. */
  test?: boolean;
  /** Deliver to this subscription only, whatever its filters (test sends). */
  onlyWebhookId?: string;
}

/** What was written. */
export interface RaisedEvent {
  /** Undefined when no subscription wanted the event: nothing was written. */
  eventId: string | undefined;
  deliveryIds: string[];
}

/** The transactional outbox (what later features call to tell partners something happened). */
export interface Outbox {
  /**
   * Raises an event inside the caller's transaction: the event row with the exact body to POST, one
   * delivery per matching ACTIVE subscription of the partner and environment, and a queued wake-up per
   * delivery. All of it commits with the caller's change or not at all.
   */
  raise(tx: Em, input: RaiseInput): Promise<RaisedEvent>;
  /** Queues wake-ups for deliveries, inside the caller's transaction. */
  enqueue(tx: Em, deliveries: { id: string; startAfter?: Date }[]): Promise<void>;
}

/** Creates the outbox. */
export function createOutbox({ jobs, clock }: { jobs: Jobs; clock: Clock }): Outbox {
  const enqueue: Outbox["enqueue"] = async (tx, deliveries) => {
    if (deliveries.length === 0) return;
    if (!tx.isInTransaction()) throw new Error("the outbox needs the caller's transaction");
    await jobs.insert(
      tx,
      DELIVER_QUEUE,
      deliveries.map((d) => ({
        data: { deliveryId: d.id },
        ...(d.startAfter && { startAfter: d.startAfter }),
      })),
    );
  };

  return {
    enqueue,
    async raise(tx, input) {
      if (!tx.isInTransaction())
        throw new Error("raise events inside the transaction of the change they report");
      const hooks = await sql<{ id: string; events: string[] }>(
        tx,
        `select id, events from webhooks
          where partner_id = $1 and environment = $2 and status = 'ACTIVE' and deleted_at is null
            and ($3::text is null or id = $3)`,
        [input.partnerId, input.environment, input.onlyWebhookId ?? null],
      );
      const targets = input.onlyWebhookId ? hooks : hooks.filter((h) => subscribed(h.events, input.type));
      if (targets.length === 0) return { eventId: undefined, deliveryIds: [] };

      const now = clock.now();
      const eventId = newId("evt");
      const body = JSON.stringify({
        id: eventId,
        type: input.type,
        createdAt: now.toISOString(),
        payload: input.payload,
        ...(input.test ? { test: true } : {}),
      });
      await sql(
        tx,
        `insert into events (id, partner_id, environment, type, body, test, created_at)
         values ($1, $2, $3, $4, $5, $6, $7)`,
        [eventId, input.partnerId, input.environment, input.type, body, input.test === true, now],
      );
      const deliveryIds = targets.map(() => newId("dlv"));
      await sql(
        tx,
        `insert into webhook_deliveries (id, event_id, webhook_id, partner_id, environment, status, next_attempt_at, created_at)
         select d.id, $2, d.webhook_id, $3, $4, 'PENDING', $5, $5
           from unnest($1::text[], $6::text[]) as d (id, webhook_id)`,
        [deliveryIds, eventId, input.partnerId, input.environment, now, targets.map((t) => t.id)],
      );
      await enqueue(
        tx,
        deliveryIds.map((id) => ({ id })),
      );
      return { eventId, deliveryIds };
    },
  };
}
