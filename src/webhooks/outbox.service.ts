import type { Clock } from "../platform/clock.ts";
import type { Em } from "../platform/db/orm.ts";
import { newId } from "../platform/ids.ts";
import type { QueueName } from "../platform/jobs/boss.ts";
import type { Jobs } from "../platform/jobs/jobs.ts";
import { type Environment, environments } from "../platform/tenancy.ts";
import { type EventType, subscribed } from "./event-types.ts";
import { webhookRepository as repo } from "./webhook.repository.ts";

/**
 * The queues that wake the delivery worker, one per environment (so a flood of sandbox wake-ups never waits in
 * front of production's, nor the other way round); their jobs carry only the delivery id.
 */
export const DELIVER_QUEUES = {
  production: "webhooks.deliver",
  sandbox: "webhooks.deliver-sandbox",
} as const satisfies Record<Environment, QueueName>;

/** A delivery to wake: its id, its environment (which queue), and when (now, unless later). */
export interface WakeUp {
  id: string;
  environment: Environment;
  startAfter?: Date;
}

/**
 * What an event is about, recorded beside it for ListEvents' `user_id` and `object_id` filters (it is not
 * part of the body sent).
 */
export interface EventSubject {
  /** The user the event concerns (`usr_…`). */
  userId?: string;
  /** The disbursement (`dsb_…`) or consent (`cns_…`) it reports. */
  objectId?: string;
}

/** An event to raise. */
export interface RaiseInput {
  partnerId: string;
  environment: Environment;
  type: EventType;
  payload: Record<string, unknown>;
  /** What the event is about; test sends have none. */
  subject?: EventSubject;
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
  /** Queues wake-ups for deliveries, inside the caller's transaction, each on its environment's queue. */
  enqueue(tx: Em, deliveries: WakeUp[]): Promise<void>;
}

/** Creates the outbox. */
export function createOutbox({ jobs, clock }: { jobs: Jobs; clock: Clock }): Outbox {
  const enqueue: Outbox["enqueue"] = async (tx, deliveries) => {
    if (deliveries.length === 0) return;
    if (!tx.isInTransaction()) throw new Error("the outbox needs the caller's transaction");
    for (const environment of environments) {
      const some = deliveries.filter((d) => d.environment === environment);
      if (some.length === 0) continue;
      await jobs.insert(
        tx,
        DELIVER_QUEUES[environment],
        some.map((d) => ({
          data: { deliveryId: d.id },
          ...(d.startAfter && { startAfter: d.startAfter }),
        })),
      );
    }
  };

  return {
    enqueue,
    async raise(tx, input) {
      if (!tx.isInTransaction())
        throw new Error("raise events inside the transaction of the change they report");
      const tenant = { partnerId: input.partnerId, environment: input.environment };
      const hooks = await repo.activeSubscriptions(tx, tenant, input.onlyWebhookId);
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
      const deliveryIds = targets.map(() => newId("dlv"));
      await repo.insertEvent(
        tx,
        {
          id: eventId,
          tenant,
          type: input.type,
          body,
          test: input.test === true,
          at: now,
          subject: input.subject ?? {},
        },
        targets.map((t, i) => ({ id: deliveryIds[i] as string, webhookId: t.id })),
      );
      await enqueue(
        tx,
        deliveryIds.map((id) => ({ id, environment: input.environment })),
      );
      return { eventId, deliveryIds };
    },
  };
}
